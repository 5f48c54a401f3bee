import type { ServiceImpl } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { createServer, type Server } from "@platform/rpc";
import { pino } from "pino";

/**
 * identity.v1.AuthService over real gRPC with VerifyJWT only: a token
 * registered with `issue` verifies to its user and org; anything else is
 * UNAUTHENTICATED invalid_credentials.
 */
export class IdentityDouble {
  readonly #tokens = new Map<string, { userId: string; orgId: string }>();
  verifications = 0;
  #server?: Server;
  url = "";

  issue(userId: string, orgId: string): string {
    const token = `jwt.${userId}.${orgId}`;
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
      envelope: "identity",
      logger: pino({ level: "silent" }),
      shutdownTimeoutMs: 1000,
      services: [{ service: AuthService, impl }],
    });
    this.url = (await this.#server.listen()).url;
    return this.url;
  }

  async close(): Promise<void> {
    await this.#server?.close();
  }
}
