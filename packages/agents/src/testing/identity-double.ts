import { randomBytes, randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { HealthCheckResponse_ServingStatus, Health } from "@platform/gen/grpc/health/v1/health_pb";
import { AuthContextSchema, AuthMode, AuthService, Role } from "@platform/gen/identity/v1/auth_pb";
import { type Served, serveH2c } from "./serve.ts";

export type Caller = { token: string; userId: string; orgId: string };

/**
 * A stand-in for identity's gRPC AuthService (VerifyToken and the health
 * check), served through the real Connect stack. Tokens are registered with
 * `caller()`; any other token is UNAUTHENTICATED, as identity answers.
 */
export class IdentityDouble {
  readonly #callers = new Map<string, Caller>();
  #served?: Served;
  #port = 0;
  verifyCalls = 0;

  caller(orgId = randomUUID(), userId = randomUUID()): Caller {
    // The exact compact JWS shape the agents service accepts (not signed: only this double knows it).
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const caller = {
      token: `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: userId, org_id: orgId })}.${randomBytes(32).toString("base64url")}`,
      userId,
      orgId,
    };
    this.#callers.set(caller.token, caller);
    return caller;
  }

  async start(): Promise<string> {
    this.#served = await serveH2c((router) => {
      router.service(AuthService, {
        verifyToken: (req) => {
          this.verifyCalls++;
          const token = req.token.replace(/^Bearer\s+/i, "");
          const caller = this.#callers.get(token);
          if (!caller) throw new ConnectError("invalid credentials", Code.Unauthenticated);
          return {
            context: create(AuthContextSchema, {
              userId: caller.userId,
              orgId: caller.orgId,
              mode: AuthMode.JWT,
              role: Role.OWNER,
              method: "jwt_session",
            }),
          };
        },
      });
      router.service(Health, {
        check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }),
      });
    }, this.#port);
    // A restart (after stop) comes back on the same port, as a restarted service would.
    this.#port = Number(new URL(this.#served.url).port);
    return this.#served.url;
  }

  /** Where it listens (after start). */
  get url(): string {
    return this.#served?.url ?? "";
  }

  async stop(): Promise<void> {
    await this.#served?.close();
    this.#served = undefined;
  }
}
