import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport, type GrpcTransportOptions, Http2SessionManager } from "@connectrpc/connect-node";
import { currentRequest } from "./context.ts";
import { GoawayGuardedSessions } from "./goaway-guard.ts";
import { withDirectUnary } from "./grpc/direct-client.ts";
import { HTTP2_SESSION_MEMORY_MB, HTTP2_STREAM_WINDOW } from "./http2-windows.ts";
import { clientTlsOptions } from "./tls/client-tls.ts";
import { clientTraceInterceptor } from "./tracing/rpc-spans.ts";
import type { ServiceTls } from "./tls/service-tls.ts";

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
 * gRPC (HTTP/2) transport to another platform service, with id and trace
 * context (W3C traceparent, a client span) propagation
 * and sessions guarded against connect-es#1768 (a restarting peer's GOAWAY
 * must not crash this process). Messages are not compressed: services talk
 * over loopback or a cluster network, where gzip costs more CPU than the
 * bytes it saves (it was the top self-time function of streamed exec
 * output on both sides). Flow-control windows are widened like the server's.
 */
export function createServiceTransport(
  options: {
    baseUrl: string;
    /**
     * For an https:// internal address: the calling service's certificate
     * (its client certificate) and the CA the server's certificate must come from.
     */
    tls?: ServiceTls;
    /** The service name the server's certificate must carry (besides the host name check). */
    expectServer?: string;
    /**
     * Methods called by grpc/direct-client.ts, not Connect's client, on the
     * same sessions: unary ones whose messages carry file data (see there),
     * server streams relayed message by message (grpc/direct-stream.ts).
     */
    direct?: readonly DescMethod[];
  } & Partial<Omit<GrpcTransportOptions, "baseUrl">>,
): Transport {
  const { tls, expectServer, direct, ...grpcOptions } = options;
  const sessionManager =
    options.sessionManager ??
    new GoawayGuardedSessions(
      new Http2SessionManager(options.baseUrl, undefined, {
        maxSessionMemory: HTTP2_SESSION_MEMORY_MB,
        settings: { initialWindowSize: HTTP2_STREAM_WINDOW },
        ...(tls ? clientTlsOptions(tls, expectServer) : {}),
      }),
    );
  const interceptors = [propagateRequestIds, clientTraceInterceptor, ...(options.interceptors ?? [])];
  const transport = createGrpcTransport({
    ...grpcOptions,
    acceptCompression: options.acceptCompression ?? [],
    sessionManager,
    interceptors,
  } as GrpcTransportOptions);
  if (!direct || direct.length === 0) return transport;
  return withDirectUnary(transport, {
    baseUrl: options.baseUrl,
    sessions: sessionManager,
    interceptors,
    methods: direct,
    readMaxBytes: options.readMaxBytes ?? 0xffffffff,
  });
}
