import { createPublicKey, type KeyObject } from "node:crypto";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { decodeProtectedHeader } from "jose";

export type AuthClient = Client<typeof AuthService>;

export function authClient(baseUrl: string): AuthClient {
  return createClient(AuthService, createGrpcTransport({ baseUrl }));
}

/** The token's public key as a KeyObject, fetched once over GetPublicKey. */
export async function publicKeyOf(client: AuthClient, token: string): Promise<KeyObject> {
  const kid = decodeProtectedHeader(token).kid!;
  const res = await client.getPublicKey({ kid });
  return createPublicKey({ key: Buffer.from(res.der), format: "der", type: "spki" });
}
