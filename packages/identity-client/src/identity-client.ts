import { type Client, Code as ConnectCode, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";
import { type AuthContext, AuthMode, AuthService } from "@platform/gen/identity/v1/auth_pb";
import { fromConnectError } from "@platform/rpc";

/** Who a credential stands for, as identity says. */
export interface Verified {
  userId: string;
  orgId: string;
  /** How the person signed in (`jwt_session`, …); empty for an API key. */
  method: string;
  /** An API key's scopes; undefined for a person (a JWT), whose role rules apply instead. */
  scopes?: string[];
}

/** Identity's answers that are about the credential, so the caller's 401: every other failure is identity's. */
const CREDENTIAL_REFUSED = [ConnectCode.Unauthenticated, ConnectCode.InvalidArgument];
/** Answers that mean no verification can pass: identity unreachable, or refusing this service's certificate. */
const NOT_REACHABLE = [
  ConnectCode.Unavailable,
  ConnectCode.DeadlineExceeded,
  ConnectCode.Canceled,
  ConnectCode.PermissionDenied,
];

/**
 * identity.v1.AuthService for the services that verify bearer credentials
 * (agents, the runtime router): one mapping of identity's answers for all.
 * A refused credential (UNAUTHENTICATED, INVALID_ARGUMENT) is PlatformError
 * unauthenticated with identity's message and reason; anything else
 * (identity down, failing, or refusing the calling service's certificate
 * with PERMISSION_DENIED) is unavailable: not the caller's fault, not a 401.
 */
export class IdentityClient {
  readonly #auth: Client<typeof AuthService>;
  readonly #health: Client<typeof Health>;

  constructor(
    transport: Transport,
    private readonly timeoutMs = 5000,
  ) {
    this.#auth = createClient(AuthService, transport);
    this.#health = createClient(Health, transport);
  }

  /** VerifyToken: a JWT or an API key, whichever the credential is. */
  verifyToken(token: string, signal?: AbortSignal): Promise<Verified> {
    return this.#verify(token, () => this.#auth.verifyToken({ token }, { signal, timeoutMs: this.timeoutMs }));
  }

  verifyJwt(token: string, signal?: AbortSignal): Promise<Verified> {
    return this.#verify(token, () => this.#auth.verifyJWT({ token }, { signal, timeoutMs: this.timeoutMs }));
  }

  verifyApiKey(key: string, signal?: AbortSignal): Promise<Verified> {
    return this.#verify(
      key,
      () => this.#auth.verifyAPIKey({ apiKey: key }, { signal, timeoutMs: this.timeoutMs }),
      AuthMode.API_KEY,
    );
  }

  /**
   * Readiness: identity's health check does not say NOT_SERVING (a server
   * without the health service passes it), and a verification of an empty
   * token gets an answer: a refusal is fine, PERMISSION_DENIED is not (identity
   * refusing this service's certificate, which no request would get past).
   */
  async reachable(timeoutMs = 2000): Promise<boolean> {
    try {
      const res = await this.#health.check({ service: "" }, { timeoutMs });
      if (res.status !== HealthCheckResponse_ServingStatus.SERVING) return false;
    } catch (err) {
      if (ConnectError.from(err).code !== ConnectCode.Unimplemented) return false;
    }
    try {
      await this.#auth.verifyJWT({ token: "" }, { timeoutMs });
      return true;
    } catch (err) {
      return !NOT_REACHABLE.includes(ConnectError.from(err).code);
    }
  }

  async #verify(
    credential: string,
    call: () => Promise<{ context?: AuthContext }>,
    mode?: AuthMode,
  ): Promise<Verified> {
    if (!credential) throw PlatformError.unauthenticated("missing bearer token");
    let ctx: AuthContext | undefined;
    try {
      ctx = (await call()).context;
    } catch (err) {
      const ce = ConnectError.from(err);
      if (CREDENTIAL_REFUSED.includes(ce.code)) {
        const refused = fromConnectError(ce);
        throw PlatformError.unauthenticated(refused.message || "invalid or expired credential", refused.reason);
      }
      throw new PlatformError(
        Code.Unavailable,
        "unavailable",
        "the identity service is unavailable",
        {},
        { cause: err },
      );
    }
    if (!ctx?.orgId || !ctx.userId) throw PlatformError.unauthenticated("the credential resolves to no organization");
    // An API key carries its scopes; one for which identity sends none grants nothing.
    const isKey = (mode ?? ctx.mode) === AuthMode.API_KEY;
    return { userId: ctx.userId, orgId: ctx.orgId, method: ctx.method, ...(isKey && { scopes: [...ctx.scopes] }) };
  }
}
