import type { Interceptor, Transport } from "@connectrpc/connect";
import { type GrpcTransportOptions, createGrpcTransport } from "@connectrpc/connect-node";
import { currentRequest } from "./context.ts";

/**
 * Copies the current request's x-request-id and x-trace-id onto outgoing
 * calls (unless the caller set them), so one id follows a request across
 * services.
 */
export const propagateRequestIds: Interceptor = (next) => (req) => {
  const info = currentRequest();
  if (info) {
    if (!req.header.has("x-request-id")) req.header.set("x-request-id", info.requestId);
    if (!req.header.has("x-trace-id")) req.header.set("x-trace-id", info.traceId);
  }
  return next(req);
};

/** gRPC (HTTP/2) transport to another platform service, with id propagation. */
export function createServiceTransport(
  options: { baseUrl: string } & Partial<Omit<GrpcTransportOptions, "baseUrl">>,
): Transport {
  return createGrpcTransport({
    ...options,
    interceptors: [propagateRequestIds, ...(options.interceptors ?? [])],
  } as GrpcTransportOptions);
}
