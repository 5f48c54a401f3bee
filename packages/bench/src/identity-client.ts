import { createPublicKey, type KeyObject } from "node:crypto";
import { type Client, createClient } from "@connectrpc/connect";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { createServiceTransport, type ServiceTls } from "@platform/rpc";
import { decodeProtectedHeader } from "jose";
import { GrpcLoadClient } from "./grpc-load-client.ts";

export type AuthClient = Client<typeof AuthService>;

/** A client of identity's internal port with `tls`, the certificate of the service the bench stands in for. */
export function authClient(baseUrl: string, tls: ServiceTls | undefined): AuthClient {
  return createClient(AuthService, createServiceTransport({ baseUrl, tls }));
}

/** The token's public key as a KeyObject, fetched once over GetPublicKey. */
export async function publicKeyOf(client: AuthClient, token: string): Promise<KeyObject> {
  const kid = decodeProtectedHeader(token).kid!;
  const res = await client.getPublicKey({ kid });
  return createPublicKey({ key: Buffer.from(res.der), format: "der", type: "spki" });
}

/** VerifyToken through the lean load client (grpc-load-client.ts), for the throughput figure (VerifyAPIKey: load/load-child.ts). */
export function authLoadClient(baseUrl: string, tls: ServiceTls | undefined) {
  const client = new GrpcLoadClient(baseUrl, tls);
  return {
    verifyToken: (token: string) => client.unary(AuthService.method.verifyToken, { token }),
    close: () => client.close(),
  };
}
