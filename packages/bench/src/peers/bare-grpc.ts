import { create, toBinary } from "@bufbuild/protobuf";
import { AuthMode, Env, Role, VerifyAPIKeyResponseSchema } from "@platform/gen/identity/v1/auth_pb";
import type { ServiceTls } from "@platform/rpc";
import { envelope, respondGrpcOk, startBareHttp2 } from "./bare-http2.ts";

/**
 * The least a Node gRPC server can be: node:http2 with the same mutual TLS
 * as identity's internal port, answering every call with one fixed
 * VerifyAPIKey response (an API key's context, so the client decodes as
 * much as from ours) and grpc-status 0. No routing, no verification, no
 * interceptors, no log: the floor a latency figure's tail is compared with,
 * i.e. what the transport, the load client and this machine's scheduling
 * allow any server.
 */
export async function startBareGrpc(host: string, tls: ServiceTls): Promise<{ url: string; close(): Promise<void> }> {
  const body = toBinary(
    VerifyAPIKeyResponseSchema,
    create(VerifyAPIKeyResponseSchema, {
      context: {
        userId: "00000000-0000-4000-8000-000000000001",
        orgId: "00000000-0000-4000-8000-000000000002",
        mode: AuthMode.API_KEY,
        role: Role.OWNER,
        env: Env.LIVE,
        apiKeyId: "00000000-0000-4000-8000-000000000003",
        method: "api_key:sk_live_abcdefgh",
        scopes: ["read", "agents:write", "sessions:run"],
      },
    }),
  );
  const frame = envelope(body);
  return startBareHttp2(host, tls, (stream) => {
    stream.on("data", () => {});
    stream.on("end", () => {
      if (stream.destroyed) return;
      respondGrpcOk(stream);
      stream.end(frame);
    });
    stream.on("error", () => {});
  });
}
