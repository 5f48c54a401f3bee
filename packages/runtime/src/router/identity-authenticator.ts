import { Code as ConnectCode, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { fromConnectError } from "@platform/rpc";
import type { Authenticator, Principal } from "./authenticator.ts";

/** Authenticator over identity's gRPC AuthService.VerifyJWT and VerifyAPIKey. */
export class IdentityAuthenticator implements Authenticator {
  readonly #client: Client<typeof AuthService>;

  constructor(
    transport: Transport,
    private readonly timeoutMs = 5000,
  ) {
    this.#client = createClient(AuthService, transport);
  }

  /**
   * Whether identity answers at all (for /readyz): any answer to an empty
   * token, a rejection included, means it is up; except PERMISSION_DENIED,
   * identity refusing this router's certificate, which no request would get past.
   */
  async reachable(timeoutMs = 1000): Promise<boolean> {
    try {
      await this.#client.verifyJWT({ token: "" }, { timeoutMs });
      return true;
    } catch (err) {
      const code = ConnectError.from(err).code;
      return ![
        ConnectCode.Unavailable,
        ConnectCode.DeadlineExceeded,
        ConnectCode.Canceled,
        ConnectCode.PermissionDenied,
      ].includes(code);
    }
  }

  async verifyJwt(token: string, signal?: AbortSignal): Promise<Principal> {
    return this.#verify(() => this.#client.verifyJWT({ token }, { signal, timeoutMs: this.timeoutMs }), false);
  }

  /** VerifyAPIKey, as the agents service verifies keys: the principal carries the key's scopes. */
  async verifyApiKey(key: string, signal?: AbortSignal): Promise<Principal> {
    return this.#verify(() => this.#client.verifyAPIKey({ apiKey: key }, { signal, timeoutMs: this.timeoutMs }), true);
  }

  async #verify(
    call: () => Promise<{ context?: { userId: string; orgId: string; scopes: string[] } }>,
    withScopes: boolean,
  ): Promise<Principal> {
    try {
      const ctx = (await call()).context;
      if (!ctx?.orgId || !ctx.userId) throw PlatformError.unauthenticated("token carries no user or org");
      return { userId: ctx.userId, orgId: ctx.orgId, ...(withScopes && { scopes: [...ctx.scopes] }) };
    } catch (err) {
      if (err instanceof PlatformError) throw err;
      const ce = ConnectError.from(err);
      if (ce.code === ConnectCode.Unauthenticated) {
        const p = fromConnectError(ce);
        throw PlatformError.unauthenticated(p.message || "invalid token", p.reason);
      }
      // Identity down or failing: not the caller's fault, and not a 401.
      throw PlatformError.unavailable("identity service unavailable");
    }
  }
}
