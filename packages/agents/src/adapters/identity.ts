import type { Transport } from "@connectrpc/connect";
import { IdentityClient } from "@platform/identity-client";
import type { AuthContext } from "../domain/model.ts";
import type { Authenticator } from "../domain/ports.ts";

/** The Authenticator port over identity's VerifyToken (a person's JWT or an API key), through the shared client. */
export class IdentityAuthenticator implements Authenticator {
  readonly #client: IdentityClient;

  constructor(transport: Transport, timeoutMs = 5000) {
    this.#client = new IdentityClient(transport, timeoutMs);
  }

  verify(token: string): Promise<AuthContext> {
    return this.#client.verifyToken(token);
  }

  reachable(): Promise<boolean> {
    return this.#client.reachable();
  }
}
