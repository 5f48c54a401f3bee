import type { DescMethod } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { createServiceTransport, type ServiceTls } from "@platform/rpc";

/**
 * gRPC transport to another platform service (ids propagated, GOAWAY-guarded
 * by @platform/rpc). With `tls`, the agents service's certificate is its
 * client certificate and the server must present `expectServer`'s. `direct`:
 * unary methods that carry file data, called without Connect's client
 * (@platform/rpc's grpc/direct-client.ts).
 */
export function grpcTransport(
  baseUrl: string,
  tls?: ServiceTls,
  expectServer?: string,
  direct?: readonly DescMethod[],
): Transport {
  return createServiceTransport({ baseUrl, tls, expectServer: tls ? expectServer : undefined, direct });
}
