import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { KeyPublicationService } from "@platform/gen/identity/v1/keys_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import {
  AccountService,
  AuditService,
  MemberService,
  OrgAPIKeyService,
  TeamService,
} from "@platform/gen/identity/v1/teams_pb";
import { WebhookEventService, WebhookService } from "@platform/gen/identity/v1/webhooks_pb";
import openApi from "@platform/gen/openapi/identity.json" with { type: "json" };
import { type CallerPolicy, createServer, type ListenResult, type Server, type ServiceTls } from "@platform/rpc";
import { sql } from "kysely";
import type { Logger } from "pino";
import type { Identity } from "../identity.ts";
import { registerIdentityMetrics } from "../metrics.ts";
import { authService, orgService, sessionService, userService } from "./handlers.ts";
import { identityInputRefusal } from "./input-refusals.ts";
import { identityInterceptors } from "./interceptors.ts";
import { keyPublicationService } from "./key-publication-handlers.ts";
import { loginShed } from "./login-shed.ts";
import { identityEnvelope } from "./rest-envelope.ts";
import { accountService, auditService, memberService, orgApiKeyService, teamService } from "./teams-handlers.ts";
import { webhookEventService, webhookService } from "./webhooks-handlers.ts";

export type ServerSettings = {
  host: string;
  serverPort: number;
  grpcPort: number;
  bodyLimitBytes: number;
  requestTimeoutMs: number;
  readHeaderTimeoutMs: number;
  shutdownTimeoutMs: number;
  /** Origins whose pages may call the REST port (CORS); none when absent. */
  corsAllowedOrigins?: readonly string[];
  /** METRICS_TOKEN: GET /metrics on both ports with this bearer token; not served when absent. */
  metricsToken?: string;
};

export type IdentityServers = {
  rest: Server;
  grpc: Server;
  listen(): Promise<{ rest: ListenResult; grpc: ListenResult }>;
  close(): Promise<void>;
};

/**
 * Who may call what on IDENTITY_GRPC_PORT (certificate service names). The
 * agents service verifies every HTTP request's credential (VerifyToken); the
 * runtime router verifies JWTs (VerifyJWT); the e2b service verifies the API
 * keys the e2b SDK sends (VerifyToken); the public key is no secret.
 * IssueJWT mints a token for any member without a credential: no service
 * calls it, so only the operator (the person holding the launcher's data
 * directory, who could read the database anyway) may. The REST services are
 * served here for the operator's debugging only.
 */
export const IDENTITY_CALLERS: CallerPolicy = {
  "identity.v1.AuthService": {
    VerifyToken: ["agents", "runtime-router", "e2b", "operator"],
    VerifyJWT: ["agents", "runtime-router", "operator"],
    VerifyAPIKey: ["agents", "runtime-router", "e2b", "operator"],
    GetPublicKey: ["agents", "runtime-router", "runtime-worker", "operator"],
    IssueJWT: ["operator"],
  },
  "identity.v1.SessionService": ["operator"],
  "identity.v1.UserService": ["operator"],
  "identity.v1.OrgService": ["operator"],
  "identity.v1.MemberService": ["operator"],
  "identity.v1.OrgAPIKeyService": ["operator"],
  "identity.v1.TeamService": ["operator"],
  "identity.v1.AccountService": ["operator"],
  "identity.v1.AuditService": ["operator"],
  "identity.v1.KeyPublicationService": ["agents", "runtime-router", "runtime-worker", "operator"],
  "identity.v1.WebhookService": ["operator"],
  // The agents service relays its sessions' events (issue 25); nothing else publishes.
  "identity.v1.WebhookEventService": ["agents", "operator"],
};

/**
 * Two listeners. SERVER_PORT (public) serves the REST surface (Session, User
 * and Org services) as REST only. IDENTITY_GRPC_PORT (internal) serves the
 * same plus AuthService over mutual TLS to the callers IDENTITY_CALLERS
 * names: IssueJWT mints tokens for any member and must never be reachable
 * from the public port. `internalTls` undefined: INTERNAL_TLS=off.
 */
export function createIdentityServers(
  identity: Identity,
  settings: ServerSettings,
  logger: Logger,
  internalTls: ServiceTls | undefined,
): IdentityServers {
  const interceptors = identityInterceptors(identity);
  const readiness = async () => {
    await sql`select 1`.execute(identity.db);
    return true;
  };
  const restServices = [
    { service: SessionService, impl: sessionService(identity) },
    { service: UserService, impl: userService(identity) },
    { service: OrgService, impl: orgService(identity) },
    { service: MemberService, impl: memberService(identity) },
    { service: OrgAPIKeyService, impl: orgApiKeyService(identity) },
    { service: TeamService, impl: teamService(identity) },
    { service: AccountService, impl: accountService(identity) },
    { service: AuditService, impl: auditService(identity) },
    { service: KeyPublicationService, impl: keyPublicationService(identity) },
    { service: WebhookService, impl: webhookService(identity) },
  ];
  const common = {
    envelope: identityEnvelope,
    interceptors,
    inputRefusal: identityInputRefusal,
    readiness,
    host: settings.host,
    bodyLimitBytes: settings.bodyLimitBytes,
    requestTimeoutMs: settings.requestTimeoutMs,
    readHeaderTimeoutMs: settings.readHeaderTimeoutMs,
    shutdownTimeoutMs: settings.shutdownTimeoutMs,
    strictBody: true,
    shed: loginShed(identity.hasher),
    // The spec shows API keys' expires_at as "RFC 3339 or null".
    json: { emitNulls: true },
    metricsToken: settings.metricsToken,
    // Identity calls no other service and its handlers log through
    // requestInfo(ctx): the request's ids need no AsyncLocalStorage here,
    // whose promise hooks Node 20 would run on every promise and nextTick
    // of the process (rpc ServerOptions.asyncRequestContext).
    asyncRequestContext: false,
  };
  const rest = createServer({
    ...common,
    name: "identity",
    services: restServices,
    port: settings.serverPort,
    restOnly: true,
    // Public: it describes the routes and holds no secret (THREAT_MODEL.md).
    documents: { "/openapi.json": openApi },
    cors: { allowedOrigins: settings.corsAllowedOrigins ?? [] },
    // A login storm's connections are accepted up to 8 a loop turn rather than
    // one (rpc accept-handles.ts), so their refusals do not wait in the listen
    // queue behind one accept per turn. login-storm.db, alternated runs at load
    // 2.5-3.6: clients' shed p99 1.41-1.46 s with 8 against 1.70-1.95 s with 1
    // (16: 1.27-1.48 s, but the probes' p90 during the storm 35-56 ms against
    // 18-32 ms with 8 and 10-16 ms with 1: each turn then carries more requests).
    acceptHandles: 8,
    logger: logger.child({ listener: "rest" }),
  });
  const grpc = createServer({
    ...common,
    name: "identity-grpc",
    services: [
      { service: AuthService, impl: authService(identity) },
      { service: WebhookEventService, impl: webhookEventService(identity) },
      ...restServices,
    ],
    port: settings.grpcPort,
    internal: { tls: internalTls, callers: IDENTITY_CALLERS },
    logger: logger.child({ listener: "grpc" }),
    // One process, one registry: both ports show all of it.
    metrics: rest.metrics,
  });
  registerIdentityMetrics(rest.metrics.registry, identity);
  return {
    rest,
    grpc,
    async listen() {
      const r = await rest.listen();
      try {
        return { rest: r, grpc: await grpc.listen() };
      } catch (err) {
        await rest.close();
        throw err;
      }
    },
    async close() {
      await Promise.all([rest.close(), grpc.close()]);
    },
  };
}
