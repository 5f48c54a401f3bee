import { randomBytes, randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { type AuthContext, AuthContextSchema, AuthMode, AuthService, Role } from "@platform/gen/identity/v1/auth_pb";
import { codeNameEnvelope, createServer, type Server, type ServiceTls } from "@platform/rpc";
import { pino } from "pino";

export type Caller = { token: string; userId: string; orgId: string };

export interface IdentityDoubleOptions {
  /** An identity certificate: then it serves https to the `callers` certificates only. */
  tls?: ServiceTls;
  /** Who may call AuthService over TLS; default the agents service and the runtime router. */
  callers?: string[];
}

/**
 * identity.v1.AuthService (VerifyToken, VerifyJWT, VerifyAPIKey) and the
 * gRPC health check, served through the platform's own rpc server, for the
 * services that verify credentials with IdentityClient. Credentials are
 * registered with `caller()` (a person's JWT) or `apiKey()`; any other one is
 * UNAUTHENTICATED invalid_credentials, as identity answers.
 */
export class IdentityDouble {
  readonly #contexts = new Map<string, AuthContext>();
  #server?: Server;
  #port = 0;
  #url = "";
  /** Verifications asked for (every method). */
  verifyCalls = 0;

  constructor(private readonly options: IdentityDoubleOptions = {}) {}

  /** A person: a token in the exact compact JWS shape the services accept (not signed: only this double knows it). */
  caller(orgId: string = randomUUID(), userId: string = randomUUID()): Caller {
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const token = `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: userId, org_id: orgId })}.${randomBytes(32).toString("base64url")}`;
    this.#contexts.set(
      token,
      create(AuthContextSchema, { userId, orgId, mode: AuthMode.JWT, role: Role.OWNER, method: "jwt_session" }),
    );
    return { token, userId, orgId };
  }

  /** An API key of the org with these scopes. */
  apiKey(scopes: string[], orgId: string = randomUUID(), userId: string = randomUUID()): Caller {
    // The exact shape the services accept (sk_<env>_ and 49 base62 characters); only identity checks the checksum.
    const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const token = `sk_test_${Array.from(randomBytes(49), (b) => base62[b % 62]).join("")}`;
    this.#contexts.set(token, create(AuthContextSchema, { userId, orgId, mode: AuthMode.API_KEY, scopes }));
    return { token, userId, orgId };
  }

  #verify(credential: string, mode?: AuthMode): { context: AuthContext } {
    this.verifyCalls++;
    const context = this.#contexts.get(credential.replace(/^Bearer\s+/i, ""));
    if (!context || (mode !== undefined && context.mode !== mode))
      throw PlatformError.unauthenticated("invalid credentials", "invalid_credentials");
    return { context };
  }

  /** Listens (again after stop, on the same port, as a restarted identity would); returns its URL. */
  async start(): Promise<string> {
    const impl: Partial<ServiceImpl<typeof AuthService>> = {
      verifyToken: (req) => this.#verify(req.token),
      verifyJWT: (req) => this.#verify(req.token, AuthMode.JWT),
      verifyAPIKey: (req) => this.#verify(req.apiKey, AuthMode.API_KEY),
    };
    const { tls, callers = ["agents", "runtime-router"] } = this.options;
    this.#server = createServer({
      name: "identity-double",
      // Called over gRPC only: no REST body is rendered.
      envelope: codeNameEnvelope("identity-double"),
      logger: pino({ level: "silent" }),
      shutdownTimeoutMs: 1000,
      port: this.#port,
      services: [{ service: AuthService, impl }],
      ...(tls && { internal: { tls, callers: { [AuthService.typeName]: callers } } }),
    });
    const { url, port } = await this.#server.listen();
    this.#port = port;
    this.#url = url;
    return url;
  }

  /** Where it listens (after start). */
  get url(): string {
    return this.#server ? this.#url : "";
  }

  async stop(): Promise<void> {
    await this.#server?.close();
    this.#server = undefined;
  }
}
