import type { Transport } from "@connectrpc/connect";
import { createServiceTransport } from "@platform/rpc";

/** gRPC transport to another platform service (ids propagated, GOAWAY-guarded by @platform/rpc). */
export function grpcTransport(baseUrl: string): Transport {
  return createServiceTransport({ baseUrl });
}
