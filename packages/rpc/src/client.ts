import type { Interceptor, Transport } from "@connectrpc/connect";
import { type GrpcTransportOptions, Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { currentRequest } from "./context.ts";
import { GoawayGuardedSessions } from "./goaway-guard.ts";

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

/**
 * gRPC (HTTP/2) transport to another platform service, with id propagation
 * and sessions guarded against connect-es#1768 (a restarting peer's GOAWAY
 * must not crash this process).
 */
export function createServiceTransport(
  options: { baseUrl: string } & Partial<Omit<GrpcTransportOptions, "baseUrl">>,
): Transport {
  return createGrpcTransport({
    ...options,
    sessionManager: options.sessionManager ?? new GoawayGuardedSessions(new Http2SessionManager(options.baseUrl)),
    interceptors: [propagateRequestIds, ...(options.interceptors ?? [])],
  } as GrpcTransportOptions);
}
