import { type Database, statementRunner } from "@platform/db";
import { ApiKeys } from "./api-keys/api-keys.ts";
import { type Clock, type KeyEnv, systemClock } from "./auth/auth-context.ts";
import { Authenticator } from "./auth/authenticator.ts";
import { type BootstrapResult, bootstrapOwner } from "./bootstrap/bootstrap.ts";
import { AuthCaches } from "./cache/auth-caches.ts";
import { InvalidationListener } from "./cache/invalidation-listener.ts";
import {
  type Argon2Settings,
  type Bootstrap,
  type DeploymentEnv,
  LOGIN_THROTTLE_DEFAULTS,
  type LoginThrottleSettings,
} from "./config/settings.ts";
import type { IdentityDB } from "./db/schema.ts";
import { IdempotencyStore } from "./idempotency/idempotency-store.ts";
import { SigningKeys } from "./keys/signing-keys.ts";
import { LoginThrottle } from "./login-throttle/login-throttle.ts";
import { Orgs } from "./orgs/orgs.ts";
import { PasswordHasher } from "./passwords/password-hasher.ts";
import { RefreshTokens } from "./sessions/refresh-tokens.ts";
import { Sessions } from "./sessions/sessions.ts";
import { JwtService } from "./tokens/jwt-service.ts";
import { MembershipRoles } from "./users/membership-roles.ts";
import { Users } from "./users/users.ts";
import { Account } from "./users/account.ts";
import { AuditLog } from "./audit/audit-log.ts";
import { Invitations } from "./members/invitations.ts";
import { Members } from "./members/members.ts";
import { MyOrgs } from "./orgs/my-orgs.ts";
import { TokenPairs } from "./sessions/token-pairs.ts";
import { DELIVERY_DEFAULTS, type DeliverySettings, WebhookDeliveryWorker } from "./webhooks/delivery-worker.ts";
import { WebhookEndpoints } from "./webhooks/endpoints.ts";
import type { WebhookEvent } from "./webhooks/outbox.ts";
import { publishWebhookEvents } from "./webhooks/publish.ts";

export type IdentityOptions = {
  kek: Buffer;
  env: DeploymentEnv;
  jwtTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  argon2: Argon2Settings;
  /** LOGIN_THROTTLE_*; defaults when absent. */
  loginThrottle?: LoginThrottleSettings;
  /** How long a running idempotent request holds its key before another may take over. */
  idempotencyLockMs: number;
  clock?: Clock;
  /** Self-service sign-up (IDENTITY_SIGNUP=open); default off. */
  signupOpen?: boolean;
  /** Lifetime of an invitation token; default 7 days. */
  invitationTtlSeconds?: number;
  /** REST base URL outside verifiers use (discovery); default: the request's Host. */
  publicUrl?: string;
  /** WEBHOOK_* settings; defaults when absent. */
  webhooks?: Partial<DeliverySettings> & { rotationOverlapMs?: number };
};

/** The spec's `env` claim is live|test; ENV is dev|staging|prod. prod issues live tokens, the rest test. */
export const claimEnvOf = (env: DeploymentEnv): KeyEnv => (env === "prod" ? "live" : "test");

/** The identity domain, wired on one database. Knows nothing of transports. */
export function createIdentity(database: Database<IdentityDB>, options: IdentityOptions) {
  const db = database.db;
  const clock = options.clock ?? systemClock;
  const hasher = new PasswordHasher(options.argon2);
  // The embedded database has one process, this one, so every write is seen
  // here; with PostgreSQL the caches wait for followChanges.
  const caches = new AuthCaches({ enabled: database.kind === "pglite" });
  const memberships = new MembershipRoles(db, caches);
  const keys = new SigningKeys(db, options.kek, caches);
  const run = statementRunner(database);
  const users = new Users(db, hasher, run);
  const orgs = new Orgs(db);
  const apiKeys = new ApiKeys(db, memberships, caches, clock);
  const jwt = new JwtService(keys, memberships, caches, { env: claimEnvOf(options.env), clock });
  const refreshTokens = new RefreshTokens(db, options.refreshTokenTtlSeconds, run);
  const loginThrottle = new LoginThrottle(options.loginThrottle ?? LOGIN_THROTTLE_DEFAULTS, clock);
  const sessions = new Sessions({
    db,
    users,
    hasher,
    jwt,
    refreshTokens,
    throttle: loginThrottle,
    jwtTtlSeconds: options.jwtTtlSeconds,
    clock,
  });
  const authenticator = new Authenticator(jwt, apiKeys);
  const pairs = new TokenPairs({ jwt, refreshTokens, jwtTtlSeconds: options.jwtTtlSeconds, clock });
  const members = new Members(db, memberships, caches, clock);
  const invitations = new Invitations({
    db,
    hasher,
    throttle: loginThrottle,
    pairs,
    ttlSeconds: options.invitationTtlSeconds ?? 7 * 24 * 3600,
    clock,
  });
  const myOrgs = new MyOrgs({ db, orgs, roles: memberships, hasher, pairs, signupOpen: options.signupOpen ?? false });
  const account = new Account({ db, hasher, pairs, clock });
  const audit = new AuditLog(db);
  const idempotency = new IdempotencyStore(db, { lockMs: options.idempotencyLockMs, kek: options.kek, clock });
  const webhooks = new WebhookEndpoints({
    db,
    kek: options.kek,
    clock,
    rotationOverlapMs: options.webhooks?.rotationOverlapMs ?? 24 * 3_600_000,
  });
  const deliverySettings: DeliverySettings = { ...DELIVERY_DEFAULTS, ...options.webhooks };
  /** A delivery worker on this database (another replica's, for tests: its own clock and settings). */
  const newWebhookWorker = (o: { clock?: Clock; settings?: Partial<DeliverySettings> } = {}) =>
    new WebhookDeliveryWorker({
      db,
      kek: options.kek,
      clock: o.clock ?? clock,
      settings: { ...deliverySettings, ...o.settings },
    });
  // Started by the app (startApp); tests stop it and drive workers of their own.
  const webhookWorker = newWebhookWorker();
  return {
    database,
    db,
    clock,
    hasher,
    caches,
    memberships,
    keys,
    users,
    orgs,
    apiKeys,
    jwt,
    refreshTokens,
    loginThrottle,
    sessions,
    authenticator,
    idempotency,
    members,
    invitations,
    myOrgs,
    account,
    audit,
    webhooks,
    webhookWorker,
    newWebhookWorker,
    /** Other services' events (WebhookEventService): stored with their deliveries, then the worker is woken. */
    async publishWebhookEvents(events: readonly WebhookEvent[]): Promise<number> {
      const accepted = await publishWebhookEvents(db, events, clock());
      if (accepted > 0) webhookWorker.wake();
      return accepted;
    },
    /** Set by the app to the REST listener's URL when IDENTITY_PUBLIC_URL is not given. */
    publicUrl: options.publicUrl as string | undefined,
    /** Enables the caches once other replicas' writes are followed on the PostgreSQL at `url`. */
    async followChanges(url: string, onError?: (err: unknown) => void): Promise<InvalidationListener> {
      const listener = new InvalidationListener(url, caches, onError);
      await listener.start();
      return listener;
    },
    bootstrap: (input: Bootstrap): Promise<BootstrapResult> => bootstrapOwner({ db, users, orgs }, input),
  };
}

export type Identity = ReturnType<typeof createIdentity>;
