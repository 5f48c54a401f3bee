import { type Client, Code as ConnectCode, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";
import { AuthMode, AuthService } from "@platform/gen/identity/v1/auth_pb";
import type { AuthContext } from "../domain/model.ts";
import type { Authenticator } from "../domain/ports.ts";

/** Authenticator over identity's gRPC `identity.v1.AuthService/VerifyToken`. */
export class IdentityAuthenticator implements Authenticator {
  readonly #auth: Client<typeof AuthService>;
  readonly #health: Client<typeof Health>;

  constructor(
    transport: Transport,
    private readonly timeoutMs = 5000,
  ) {
    this.#auth = createClient(AuthService, transport);
    this.#health = createClient(Health, transport);
  }

  async verify(token: string): Promise<AuthContext> {
    if (!token) throw PlatformError.unauthenticated("missing bearer token");
    try {
      const res = await this.#auth.verifyToken({ token }, { timeoutMs: this.timeoutMs });
      const ctx = res.context;
      if (!ctx?.orgId || !ctx.userId) throw PlatformError.unauthenticated("the credential resolves to no organization");
      // An API key carries its scopes; an identity that sends none for a key grants nothing.
      return {
        userId: ctx.userId,
        orgId: ctx.orgId,
        method: ctx.method,
        ...(ctx.mode === AuthMode.API_KEY && { scopes: ctx.scopes }),
      };
    } catch (err) {
      if (err instanceof PlatformError) throw err;
      const connect = ConnectError.from(err);
      if (
        connect.code === ConnectCode.Unauthenticated ||
        connect.code === ConnectCode.InvalidArgument ||
        connect.code === ConnectCode.PermissionDenied
      ) {
        throw PlatformError.unauthenticated("invalid or expired bearer token");
      }
      throw new PlatformError(
        Code.Unavailable,
        "unavailable",
        "the identity service is unavailable",
        {},
        { cause: err },
      );
    }
  }

  /**
   * Identity is reachable when its gRPC health check answers SERVING; a
   * server without the health service still counts once it answers at all.
   */
  async reachable(): Promise<boolean> {
    try {
      const res = await this.#health.check({ service: "" }, { timeoutMs: 2000 });
      return res.status === HealthCheckResponse_ServingStatus.SERVING;
    } catch (err) {
      return ConnectError.from(err).code === ConnectCode.Unimplemented;
    }
  }
}
