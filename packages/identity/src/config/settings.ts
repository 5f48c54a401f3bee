import {
  bool,
  ConfigError,
  custom,
  duration,
  type Env,
  host,
  int,
  internalTlsRows,
  logLevel,
  oneOf,
  port,
  raw,
  readSettings,
  text,
  url,
  type Values,
} from "@platform/config";
import { corsAllowedOriginsSetting, metricsTokenSetting, otelEndpointSetting } from "@platform/rpc/settings";
import type { RotationPolicy } from "../keys/signing-keys.ts";
import { TrustedProxies } from "../login-throttle/client-address.ts";
import { MAX_TTL_SECONDS } from "../tokens/max-ttl.ts";
import { DELIVERY_DEFAULTS, type DeliverySettings } from "../webhooks/delivery-settings.ts";

/** The platform's one ConfigError under the name identity has always exported; `setting` names the variable. */
export { ConfigError as SettingsError };

export type DeploymentEnv = "dev" | "staging" | "prod";
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

export type Argon2Settings = {
  memoryKiB: number;
  timeCost: number;
  parallelism: number;
  maxConcurrent: number;
  /** Hashes waiting for a slot beyond which a caller gets 503 at once (ARGON2_MAX_QUEUE). */
  maxQueue?: number;
  /** Nice steps of the threads that hash below the process (ARGON2_THREAD_NICE; 0: unchanged). */
  threadNice?: number;
};

/**
 * OWASP password storage cheat sheet minimum for argon2id: m=19 MiB, t=2,
 * p=1. Two hashes at once: each is single-threaded and CPU-bound, so more
 * than the cores in flight only adds memory (19 MiB each), not throughput.
 */
export const ARGON2_DEFAULTS = {
  memoryKiB: 19_456,
  timeCost: 2,
  parallelism: 1,
  maxConcurrent: 2,
  maxQueue: 32,
  threadNice: 10,
} satisfies Argon2Settings;

/**
 * Login throttling (LOGIN_THROTTLE_*): per account (lower(email)) and per
 * client address, failures beyond the free ones back off exponentially.
 */
export type LoginThrottleSettings = {
  accountFreeFailures: number;
  addressFreeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Failures are forgotten after this long without a new one. */
  windowMs: number;
  /** Entries kept per kind (accounts, addresses); the least recently used go first. */
  maxEntries: number;
  /** Proxies in front whose X-Forwarded-For entries are trusted (0: use the socket's address). */
  trustedProxyHops: number;
  /** Addresses or CIDRs of proxies (the platform's router) whose X-Forwarded-For is believed; empty: none. */
  trustedProxies: string[];
};

export const LOGIN_THROTTLE_DEFAULTS: LoginThrottleSettings = {
  accountFreeFailures: 5,
  addressFreeFailures: 100,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 15 * 60_000,
  maxEntries: 100_000,
  trustedProxyHops: 0,
  trustedProxies: [],
};

export type Bootstrap = { email: string; password: string; name: string; orgName: string; orgSlug?: string };

/** Every row of the identity Limits table, plus the few settings this implementation adds. */
export type Settings = {
  /** Pooled server connection. Absent: embedded PGlite under `dataDir` (design.md's one-machine shape). */
  databaseUrl?: string;
  /** Direct connection used by the migrator only; falls back to databaseUrl. */
  migrationDbUrl?: string;
  /** PGlite directory when databaseUrl is absent; absent too: in memory. */
  dataDir?: string;
  /** 32-byte AES-256 key encrypting signing keys at rest. */
  kek: Buffer;
  host: string;
  serverPort: number;
  grpcPort: number;
  env: DeploymentEnv;
  jwtTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  requestTimeoutMs: number;
  readHeaderTimeoutMs: number;
  shutdownTimeoutMs: number;
  bodyLimitBytes: number;
  dbMaxConns: number;
  dbMinConns: number;
  dbMaxConnLifetimeMs: number;
  logLevel: LogLevel;
  otelEndpoint?: string;
  argon2: Argon2Settings;
  loginThrottle: LoginThrottleSettings;
  bootstrap?: Bootstrap;
  /** IDENTITY_SIGNUP=open: anyone may sign up (POST /v1/auth/signup). Default closed. */
  signupOpen: boolean;
  /** INVITATION_TTL: how long an invitation token stays valid (default 7 days). */
  invitationTtlSeconds: number;
  /** IDENTITY_PUBLIC_URL: identity's REST base as outside verifiers reach it (discovery's jwks_uri); default: the request's Host. */
  publicUrl?: string;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the REST port (default none). */
  corsAllowedOrigins: string[];
  /** METRICS_TOKEN: the bearer token of GET /metrics on both ports; unset: /metrics is not served. */
  metricsToken?: string;
  /** IDENTITY_KEY_ROTATION_INTERVAL, IDENTITY_KEY_PREPUBLISH, IDENTITY_KEY_RETENTION (keyRotationSettings). */
  keyRotation: RotationPolicy;
  /** WEBHOOK_* and WEBHOOKS_ALLOW_PRIVATE_TARGETS. */
  webhooks: DeliverySettings & { rotationOverlapMs: number };
};

/** Scheduled signing-key rotation: a new key every 30 days (720h), published an hour before it signs. */
export const KEY_ROTATION_DEFAULTS = { intervalMs: 720 * 3_600_000, prePublishMs: 3_600_000 };

const POSTGRES = { protocols: ["postgres:", "postgresql:"], secret: true } as const;
const KEK_RULE = "64 hex characters, a 32-byte AES-256 key";

/** Every setting of identity, in the order `--settings` and the README list them. */
export const IDENTITY_SETTINGS = {
  kek: custom("IDENTITY_AUTHKEY_KEK", {
    shown: "required",
    doc: `${KEK_RULE}, encrypting the signing keys at rest; never echoed`,
    read: (env) => {
      const hex = raw(env, "IDENTITY_AUTHKEY_KEK");
      if (hex === undefined)
        throw new ConfigError("IDENTITY_AUTHKEY_KEK", `IDENTITY_AUTHKEY_KEK is required (${KEK_RULE})`);
      if (!/^[0-9a-fA-F]{64}$/.test(hex))
        throw new ConfigError("IDENTITY_AUTHKEY_KEK", `IDENTITY_AUTHKEY_KEK must be exactly ${KEK_RULE}`);
      return Buffer.from(hex, "hex");
    },
  }),
  databaseUrl: url("DATABASE_URL", {
    ...POSTGRES,
    shown: "required (or `IDENTITY_DATA_DIR`)",
    doc: "PostgreSQL, pooled connection; unset with `IDENTITY_DATA_DIR` (or `IDENTITY_EMBEDDED_MEMORY=1`): embedded PGlite",
  }),
  migrationDbUrl: url("MIGRATION_DB_URL", {
    ...POSTGRES,
    shown: "`DATABASE_URL`",
    doc: "direct connection for the migrator only",
  }),
  dataDir: text("IDENTITY_DATA_DIR", { doc: "PGlite directory when `DATABASE_URL` is unset" }),
  embeddedMemory: custom("IDENTITY_EMBEDDED_MEMORY", {
    shown: "unset",
    doc: "`1`: a throw-away in-memory PGlite when neither `DATABASE_URL` nor `IDENTITY_DATA_DIR` is set (tests, benchmarks)",
    read: (env) => raw(env, "IDENTITY_EMBEDDED_MEMORY") === "1",
  }),
  ...internalTlsRows({
    files: "PEM paths: the platform CA and identity's certificate (CN `identity`) for the gRPC port",
    off: "`off`: plaintext gRPC port without caller checks, development and tests only",
  }),
  host: host(),
  serverPort: port("SERVER_PORT", { default: 8081, doc: "REST port" }),
  grpcPort: port("IDENTITY_GRPC_PORT", { default: 50051, doc: "gRPC port (mutual TLS)" }),
  env: oneOf("ENV", ["dev", "staging", "prod"], { default: "dev", doc: "deployment environment" }),
  jwtTtl: duration("JWT_TTL", { default: 3_600_000, minMs: 1000, doc: "access token lifetime" }),
  refreshTokenTtl: duration("REFRESH_TOKEN_TTL", {
    default: 30 * 24 * 3_600_000,
    minMs: 1000,
    doc: "refresh token lifetime (30 days)",
  }),
  requestTimeoutMs: duration("REQUEST_TIMEOUT", { default: 30_000, doc: "per request" }),
  readHeaderTimeoutMs: duration("READ_HEADER_TIMEOUT", { default: 5_000, doc: "to receive a request's headers" }),
  shutdownTimeoutMs: duration("SHUTDOWN_TIMEOUT", { default: 30_000, doc: "to finish requests in flight on SIGTERM" }),
  bodyLimitBytes: int("BODY_LIMIT_BYTES", { default: 1_048_576, min: 1, max: 1 << 30, doc: "request body limit" }),
  dbMaxConns: int("DB_MAX_CONNS", { default: 20, min: 1, max: 10_000, doc: "pool size" }),
  dbMinConns: int("DB_MIN_CONNS", { default: 2, min: 0, max: 10_000, doc: "at most `DB_MAX_CONNS`" }),
  dbMaxConnLifetimeMs: duration("DB_MAX_CONN_LIFETIME", {
    default: 30 * 60_000,
    doc: "a pooled connection's lifetime",
  }),
  logLevel: logLevel(["trace", "debug", "info", "warn", "error"] as const),
  otelEndpoint: otelEndpointSetting(),
  argon2MemoryKiB: int("ARGON2_MEMORY_KIB", {
    default: ARGON2_DEFAULTS.memoryKiB,
    min: 8,
    max: 4_194_304,
    doc: "argon2id memory (OWASP minimum 19 MiB)",
  }),
  argon2TimeCost: int("ARGON2_TIME_COST", {
    default: ARGON2_DEFAULTS.timeCost,
    min: 1,
    max: 100,
    doc: "argon2id passes",
  }),
  argon2Parallelism: int("ARGON2_PARALLELISM", {
    default: ARGON2_DEFAULTS.parallelism,
    min: 1,
    max: 64,
    doc: "argon2id lanes",
  }),
  argon2MaxConcurrent: int("ARGON2_MAX_CONCURRENT", {
    default: ARGON2_DEFAULTS.maxConcurrent,
    min: 1,
    max: 1024,
    doc: "hashes at once; the rest queue",
  }),
  argon2MaxQueue: int("ARGON2_MAX_QUEUE", {
    default: ARGON2_DEFAULTS.maxQueue,
    min: 0,
    max: 100_000,
    doc: "hashes waiting beyond which a login gets 503 at once",
  }),
  argon2ThreadNice: int("ARGON2_THREAD_NICE", {
    default: ARGON2_DEFAULTS.threadNice,
    min: 0,
    max: 19,
    doc: "nice steps of libuv's threadpool threads, where argon2 hashes, below the process's own priority (Linux; at most 19): hashing gets the CPU the event loop leaves; 0: unchanged",
  }),
  accountFreeFailures: int("LOGIN_THROTTLE_ACCOUNT_FAILURES", {
    default: LOGIN_THROTTLE_DEFAULTS.accountFreeFailures,
    min: 1,
    max: 1_000_000,
    doc: "failed logins of an account before it backs off",
  }),
  addressFreeFailures: int("LOGIN_THROTTLE_ADDRESS_FAILURES", {
    default: LOGIN_THROTTLE_DEFAULTS.addressFreeFailures,
    min: 1,
    max: 1_000_000,
    doc: "failed logins from an address before it backs off",
  }),
  baseDelayMs: duration("LOGIN_THROTTLE_BASE_DELAY", {
    default: LOGIN_THROTTLE_DEFAULTS.baseDelayMs,
    doc: "first backoff, doubling with each further failure",
  }),
  maxDelayMs: duration("LOGIN_THROTTLE_MAX_DELAY", {
    default: LOGIN_THROTTLE_DEFAULTS.maxDelayMs,
    doc: "longest backoff",
  }),
  windowMs: duration("LOGIN_THROTTLE_WINDOW", {
    default: LOGIN_THROTTLE_DEFAULTS.windowMs,
    doc: "failures are forgotten after this long without a new one",
  }),
  maxEntries: int("LOGIN_THROTTLE_MAX_ENTRIES", {
    default: LOGIN_THROTTLE_DEFAULTS.maxEntries,
    min: 1,
    max: 10_000_000,
    doc: "accounts and addresses remembered each (least recently used go first)",
  }),
  trustedProxyHops: int("LOGIN_TRUSTED_PROXY_HOPS", {
    default: LOGIN_THROTTLE_DEFAULTS.trustedProxyHops,
    min: 0,
    max: 16,
    doc: "proxies in front whose `X-Forwarded-For` entries are trusted (0: the socket's address)",
  }),
  trustedProxies: custom("LOGIN_TRUSTED_PROXIES", {
    shown: "unset",
    doc: "addresses or CIDRs (comma-separated) of proxies whose `X-Forwarded-For` is believed on a connection from them, e.g. the platform's router (`bash scripts/run.sh` sets the router's address); unset: none",
    read: (env) => {
      const entries = (raw(env, "LOGIN_TRUSTED_PROXIES") ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      try {
        new TrustedProxies(entries);
      } catch (err) {
        throw new ConfigError("LOGIN_TRUSTED_PROXIES", `LOGIN_TRUSTED_PROXIES: ${(err as Error).message}`);
      }
      return entries;
    },
  }),
  bootstrapEmail: text("BOOTSTRAP_OWNER_EMAIL", { doc: "initial owner, created at start if absent" }),
  // Not trimmed: a password is taken as written.
  bootstrapPassword: custom("BOOTSTRAP_OWNER_PASSWORD", {
    shown: "unset",
    doc: "at least 8 characters; required with `BOOTSTRAP_OWNER_EMAIL`",
    read: (env) => env.BOOTSTRAP_OWNER_PASSWORD ?? "",
  }),
  bootstrapName: text("BOOTSTRAP_OWNER_NAME", { default: "Owner", doc: "the owner's display name" }),
  bootstrapOrgName: text("BOOTSTRAP_ORG_NAME", { doc: "required with `BOOTSTRAP_OWNER_EMAIL`" }),
  bootstrapOrgSlug: text("BOOTSTRAP_ORG_SLUG", { doc: "the organization's slug; derived from the name when unset" }),
  signup: oneOf("IDENTITY_SIGNUP", ["closed", "open"], {
    default: "closed",
    doc: "`open` allows `POST /v1/auth/signup`",
  }),
  invitationTtl: duration("INVITATION_TTL", {
    default: 7 * 24 * 3_600_000,
    minMs: 60_000,
    doc: "how long an invitation stays valid (7 days)",
  }),
  publicUrl: url("IDENTITY_PUBLIC_URL", {
    shown: "the request's host",
    doc: "the REST base outside verifiers reach, for discovery's `jwks_uri`",
  }),
  corsAllowedOrigins: corsAllowedOriginsSetting(
    "origins whose pages may call the REST port (comma-separated); none by default, see `@platform/rpc`",
  ),
  metricsToken: metricsTokenSetting(),
  keyRotationInterval: duration("IDENTITY_KEY_ROTATION_INTERVAL", {
    default: KEY_ROTATION_DEFAULTS.intervalMs,
    minMs: 1000,
    words: { off: undefined },
    doc: "a new signing key this often (30 days); `off`: no schedule, `rotate-keys` still works",
  }),
  keyPrePublish: duration("IDENTITY_KEY_PREPUBLISH", {
    default: KEY_ROTATION_DEFAULTS.prePublishMs,
    minMs: 1000,
    doc: "a new key is published this long before it signs; keep it above every outside verifier's key-set cache (ours says `max-age=300`, jose refetches an unknown kid after 30 s)",
  }),
  keyRetention: duration("IDENTITY_KEY_RETENTION", {
    minMs: 1000,
    shown: "max(`JWT_TTL`, 24h) + 1m",
    doc: "a retired key stays published this long: the longest token lifetime (IssueJWT's ceiling is 24 h) plus a minute for a replica that has not heard of the switch; at least `JWT_TTL`",
  }),
  webhooksAllowPrivateTargets: bool("WEBHOOKS_ALLOW_PRIVATE_TARGETS", {
    default: false,
    doc: "webhook endpoints may be on loopback, private, link-local or other non-public addresses (checked on the addresses each delivery connects to; redirects are never followed); off: such a delivery fails without a connection",
  }),
  webhookTimeout: duration("WEBHOOK_TIMEOUT", {
    default: DELIVERY_DEFAULTS.timeoutMs,
    minMs: 100,
    doc: "one delivery attempt, connection to response",
  }),
  webhookRetryBase: duration("WEBHOOK_RETRY_BASE", {
    default: DELIVERY_DEFAULTS.retryBaseMs,
    minMs: 10,
    doc: "wait after a delivery's first failed attempt, doubling with each further one (±20% jitter)",
  }),
  webhookRetryMax: duration("WEBHOOK_RETRY_MAX", {
    default: DELIVERY_DEFAULTS.retryMaxMs,
    minMs: 10,
    doc: "longest wait between two attempts (4h; with the defaults a delivery is tried for about 12 hours)",
  }),
  webhookMaxAttempts: int("WEBHOOK_MAX_ATTEMPTS", {
    default: DELIVERY_DEFAULTS.maxAttempts,
    min: 1,
    max: 100,
    doc: "attempts of one delivery before it is failed for good",
  }),
  webhookDisableAfter: int("WEBHOOK_DISABLE_AFTER", {
    default: DELIVERY_DEFAULTS.disableAfterFailures,
    min: 1,
    max: 1_000_000,
    doc: "failed attempts in a row (any delivery) after which an endpoint is disabled, with an audit entry `webhook.disabled`",
  }),
  webhookPollInterval: duration("WEBHOOK_POLL_INTERVAL", {
    default: DELIVERY_DEFAULTS.pollIntervalMs,
    minMs: 10,
    doc: "how often each replica looks for due deliveries",
  }),
  webhookRotationOverlap: duration("WEBHOOK_ROTATION_OVERLAP", {
    default: 24 * 3_600_000,
    minMs: 0,
    doc: "after a secret rotation, the previous secret keeps signing beside the new one this long (24h)",
  }),
};

/**
 * Reads and validates every setting once, at start-up. Throws ConfigError
 * naming the first missing or invalid one. Secrets never appear in messages.
 */
export function loadSettings(env: Env = process.env): Settings {
  const s = readSettings(IDENTITY_SETTINGS, env);
  // The spec makes DATABASE_URL required (cluster shape). The embedded shape
  // of design.md runs on PGlite instead, so its absence is accepted only when
  // IDENTITY_DATA_DIR says where the embedded database lives, or when
  // IDENTITY_EMBEDDED_MEMORY=1 asks for a throw-away in-memory one.
  if (!s.databaseUrl && !s.dataDir && !s.embeddedMemory) {
    throw new ConfigError(
      "DATABASE_URL",
      "DATABASE_URL is required (or set IDENTITY_DATA_DIR for the embedded PGlite database)",
    );
  }
  if (s.dbMinConns > s.dbMaxConns)
    throw new ConfigError("DB_MIN_CONNS", `DB_MIN_CONNS must not exceed DB_MAX_CONNS (${s.dbMaxConns})`);
  const jwtTtlSeconds = Math.floor(s.jwtTtl / 1000);
  return {
    databaseUrl: s.databaseUrl,
    migrationDbUrl: s.migrationDbUrl,
    dataDir: s.dataDir,
    kek: s.kek,
    host: s.host,
    serverPort: s.serverPort,
    grpcPort: s.grpcPort,
    env: s.env,
    jwtTtlSeconds,
    refreshTokenTtlSeconds: Math.floor(s.refreshTokenTtl / 1000),
    requestTimeoutMs: s.requestTimeoutMs,
    readHeaderTimeoutMs: s.readHeaderTimeoutMs,
    shutdownTimeoutMs: s.shutdownTimeoutMs,
    bodyLimitBytes: s.bodyLimitBytes,
    dbMaxConns: s.dbMaxConns,
    dbMinConns: s.dbMinConns,
    dbMaxConnLifetimeMs: s.dbMaxConnLifetimeMs,
    logLevel: s.logLevel,
    otelEndpoint: s.otelEndpoint,
    argon2: {
      memoryKiB: s.argon2MemoryKiB,
      timeCost: s.argon2TimeCost,
      parallelism: s.argon2Parallelism,
      maxConcurrent: s.argon2MaxConcurrent,
      maxQueue: s.argon2MaxQueue,
      threadNice: s.argon2ThreadNice,
    },
    loginThrottle: {
      accountFreeFailures: s.accountFreeFailures,
      addressFreeFailures: s.addressFreeFailures,
      baseDelayMs: s.baseDelayMs,
      maxDelayMs: s.maxDelayMs,
      windowMs: s.windowMs,
      maxEntries: s.maxEntries,
      trustedProxyHops: s.trustedProxyHops,
      trustedProxies: s.trustedProxies,
    },
    bootstrap: bootstrap(s),
    signupOpen: s.signup === "open",
    invitationTtlSeconds: Math.floor(s.invitationTtl / 1000),
    publicUrl: s.publicUrl?.replace(/\/+$/, ""),
    corsAllowedOrigins: s.corsAllowedOrigins,
    metricsToken: s.metricsToken,
    keyRotation: keyRotation(s, jwtTtlSeconds),
    webhooks: {
      allowPrivateTargets: s.webhooksAllowPrivateTargets,
      timeoutMs: s.webhookTimeout,
      retryBaseMs: s.webhookRetryBase,
      retryMaxMs: s.webhookRetryMax,
      maxAttempts: s.webhookMaxAttempts,
      disableAfterFailures: s.webhookDisableAfter,
      pollIntervalMs: s.webhookPollInterval,
      rotationOverlapMs: s.webhookRotationOverlap,
    },
  };
}

type Read = Values<typeof IDENTITY_SETTINGS>;

function bootstrap(s: Read): Bootstrap | undefined {
  if (s.bootstrapEmail === undefined) return undefined;
  if (s.bootstrapPassword.length < 8)
    throw new ConfigError(
      "BOOTSTRAP_OWNER_PASSWORD",
      "BOOTSTRAP_OWNER_PASSWORD is required with BOOTSTRAP_OWNER_EMAIL (at least 8 characters)",
    );
  if (s.bootstrapOrgName === undefined)
    throw new ConfigError("BOOTSTRAP_ORG_NAME", "BOOTSTRAP_ORG_NAME is required with BOOTSTRAP_OWNER_EMAIL");
  if (!/^[^\s@]+@[^\s@]+$/.test(s.bootstrapEmail))
    throw new ConfigError("BOOTSTRAP_OWNER_EMAIL", "BOOTSTRAP_OWNER_EMAIL must be an email address");
  return {
    email: s.bootstrapEmail,
    password: s.bootstrapPassword,
    name: s.bootstrapName,
    orgName: s.bootstrapOrgName,
    orgSlug: s.bootstrapOrgSlug,
  };
}

/**
 * The key schedule's rules across settings: pre-publication shorter than the
 * interval; retention (default: the longest token lifetime, max(JWT_TTL,
 * IssueJWT's 24 h ceiling), plus a minute for a replica that has not yet heard
 * of the switch) never below JWT_TTL.
 */
function keyRotation(s: Read, jwtTtlSeconds: number): RotationPolicy {
  const intervalMs = s.keyRotationInterval;
  const prePublishMs = s.keyPrePublish;
  if (intervalMs !== undefined && prePublishMs >= intervalMs)
    throw new ConfigError(
      "IDENTITY_KEY_PREPUBLISH",
      "IDENTITY_KEY_PREPUBLISH must be shorter than IDENTITY_KEY_ROTATION_INTERVAL",
    );
  const retentionMs = s.keyRetention ?? Math.max(jwtTtlSeconds, MAX_TTL_SECONDS) * 1000 + 60_000;
  if (retentionMs < jwtTtlSeconds * 1000)
    throw new ConfigError(
      "IDENTITY_KEY_RETENTION",
      "IDENTITY_KEY_RETENTION must be at least JWT_TTL (tokens signed last would be refused before they expire)",
    );
  return { intervalMs, prePublishMs, retentionMs };
}
