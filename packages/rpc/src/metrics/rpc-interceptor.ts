import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { callEnded } from "../calls/direct-transport.ts";
import type { ServerMetrics } from "./server-metrics.ts";

// gRPC's canonical names (OK, NOT_FOUND, ...), what grpc-prometheus and most dashboards label with.
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

function codeOf(e: unknown): string {
  return CODE_NAMES[ConnectError.from(e).code] ?? "UNKNOWN";
}

/**
 * Counts and times every RPC by service, method and status, and keeps the
 * number of open server streams. It runs outermost, so the status it sees is
 * the one the caller gets (after the error interceptor's conversion). A
 * stream ends when its last message is taken, it fails, or its reader stops
 * (return): CANCELLED if the call was aborted by its caller (a client gone),
 * else OK: the in-process transport's own end of the call (an SSE reader
 * stopping at the terminal event) is no cancellation.
 */
export function metricsInterceptor(metrics: ServerMetrics, server: string): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const service = req.service.typeName;
    const method = req.method.name;
    const done = (code: string) => {
      const labels = { server, service, method, code };
      metrics.rpcHandled.inc(labels);
      metrics.rpcDuration.observe(labels, (performance.now() - started) / 1000);
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (e) {
      done(codeOf(e));
      throw e;
    }
    if (!res.stream) {
      done("OK");
      return res;
    }
    const open = { server, service, method };
    metrics.rpcStreamsOpen.inc(open);
    let ended = false;
    const end = (code: string) => {
      if (ended) return;
      ended = true;
      metrics.rpcStreamsOpen.dec(open);
      done(code);
    };
    const source = res.message;
    const message: AsyncIterable<unknown> = {
      [Symbol.asyncIterator]() {
        const it = source[Symbol.asyncIterator]();
        return {
          async next() {
            try {
              const r = await it.next();
              if (r.done) end("OK");
              return r;
            } catch (e) {
              end(codeOf(e));
              throw e;
            }
          },
          async return(value?: unknown) {
            end(req.signal.aborted && req.signal.reason !== callEnded ? "CANCELLED" : "OK");
            return it.return ? it.return(value) : { done: true as const, value };
          },
          async throw(e?: unknown) {
            end(codeOf(e));
            if (it.throw) return it.throw(e);
            throw e;
          },
        };
      },
    };
    return { ...res, message } as typeof res;
  };
}
