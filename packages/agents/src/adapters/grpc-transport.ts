import type { DescMethod } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { createServiceTransport, type ServiceTls } from "@platform/rpc";

/**
 * gRPC transport to another platform service (ids propagated, GOAWAY-guarded
 * by @platform/rpc). With `tls`, the agents service's certificate is its
 * client certificate and the server must present `expectServer`'s. `direct`:
 * methods called without Connect's client (@platform/rpc's
 * grpc/direct-client.ts and, for server streams, grpc/direct-stream.ts).
 */
export function grpcTransport(
  baseUrl: string,
  tls?: ServiceTls,
  expectServer?: string,
  direct?: readonly DescMethod[],
): Transport {
  return createServiceTransport({ baseUrl, tls, expectServer: tls ? expectServer : undefined, direct });
}

/**
 * Compute's calls that skip Connect's client: the file calls (16 MiB each),
 * whose copies of the data cost more than the rest, and ExecCommand, whose
 * output is read message by message by rpc's direct stream reader (Connect's
 * client took each event through about six async generators; reading
 * `head -c 128M` through it cost the reader ~3.2 ms of CPU a MiB against
 * ~1.7-2.1, packages/bench/ANALYSIS.md, exec throughput).
 */
export const COMPUTE_DIRECT: readonly DescMethod[] = [
  ComputeService.method.readFile,
  ComputeService.method.writeFile,
  ComputeService.method.execCommand,
];

/** The transport agents calls compute with. */
export function computeTransport(baseUrl: string, tls?: ServiceTls): Transport {
  return grpcTransport(baseUrl, tls, "compute", COMPUTE_DIRECT);
}
