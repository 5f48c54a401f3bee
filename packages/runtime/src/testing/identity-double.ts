import { randomBytes } from "node:crypto";
import type { ServiceImpl } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { codeNameEnvelope, createServer, type Server, type ServiceTls } from "@platform/rpc";
import { pino } from "pino";

/**
 * identity.v1.AuthService over real gRPC with VerifyJWT only: a token
 * registered with `issue` verifies to its user and org; anything else is
 * UNAUTHENTICATED invalid_credentials. With `tls` (an identity certificate)
 * it serves https to runtime-router certificates only.
 */
export class IdentityDouble {
  constructor(private readonly tls?: ServiceTls) {}

  readonly #tokens = new Map<string, { userId: string; orgId: string }>();
  verifications = 0;
  #server?: Server;
  url = "";

  /** A token in the exact compact JWS shape the router accepts (not signed: only this double knows it). */
  issue(userId: string, orgId: string): string {
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const token = `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: userId, org_id: orgId })}.${randomBytes(32).toString("base64url")}`;
    this.#tokens.set(token, { userId, orgId });
    return token;
  }

  async start(): Promise<string> {
    const impl: Partial<ServiceImpl<typeof AuthService>> = {
      verifyJWT: (req) => {
        this.verifications++;
        const who = this.#tokens.get(req.token);
        if (!who) throw PlatformError.unauthenticated("invalid token", "invalid_credentials");
        return { context: { userId: who.userId, orgId: who.orgId } };
      },
    };
    this.#server = createServer({
      name: "identity-double",
      // Called over gRPC only: no REST body is rendered.
      envelope: codeNameEnvelope("identity-double"),
      logger: pino({ level: "silent" }),
      shutdownTimeoutMs: 1000,
      services: [{ service: AuthService, impl }],
      ...(this.tls && { internal: { tls: this.tls, callers: { [AuthService.typeName]: ["runtime-router"] } } }),
    });
    this.url = (await this.#server.listen()).url;
    return this.url;
  }

  async close(): Promise<void> {
    await this.#server?.close();
  }
}
