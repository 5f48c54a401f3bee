import { randomBytes } from "node:crypto";
import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { context, type Span, type SpanContext, SpanKind, SpanStatusCode, TraceFlags, trace } from "@opentelemetry/api";
import { currentRequest } from "../context.ts";
import { TRACER_NAME, w3c } from "./request-trace.ts";
import { tracingEnabled } from "./start.ts";

// Codes a server answers for its own fault (OpenTelemetry's rule for gRPC server spans).
const SERVER_FAULTS = new Set([2, 4, 12, 13, 14, 15]);

/**
 * The request's server span, when this process records it, named for the
 * RPC (rpc.service, rpc.method); the call's outcome (server/call-outcome.ts)
 * records on it the gRPC status the caller gets (recordRpcStatus).
 */
export function serverRpcSpan(service: string, method: string): Span | undefined {
  const span = tracingEnabled() ? trace.getActiveSpan() : undefined;
  if (!span?.isRecording()) return undefined;
  span.setAttributes({ "rpc.system": "grpc", "rpc.service": service, "rpc.method": method });
  return span;
}

/** The gRPC status of `e` (none: OK) on the server span, an error status for the server's own faults. */
export function recordRpcStatus(span: Span, e?: unknown): void {
  const code = e === undefined ? 0 : ConnectError.from(e).code;
  span.setAttribute("rpc.grpc.status_code", code);
  if (SERVER_FAULTS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: ConnectError.from(e).rawMessage });
}

/**
 * Carries the trace onto a call to another service: a client span (when this
 * process exports and the call is made for a traced operation) and the W3C
 * `traceparent` header naming it, so the callee's server span is its child.
 * A process that does not export passes on the traceparent it received.
 * Calls made outside any trace (probes, background sweeps) start none and
 * carry a traceparent that is not sampled.
 */
export const clientTraceInterceptor: Interceptor = (next) => async (req) => {
  if (req.header.has("traceparent")) return next(req);
  const active = context.active();
  const parent = trace.getSpanContext(active) ?? currentRequest()?.traceParent;
  const setter = { set: (h: Headers, k: string, v: string) => h.set(k, v) };
  if (!parent) {
    // Not sampled: the callee records nothing for it either (a readiness probe's call to identity
    // would otherwise start a trace there every few seconds).
    if (tracingEnabled()) w3c.inject(trace.setSpanContext(active, unsampled()), req.header, setter);
    return next(req);
  }
  if (!tracingEnabled()) {
    w3c.inject(trace.setSpanContext(active, parent), req.header, setter);
    return next(req);
  }
  const span = trace.getTracer(TRACER_NAME).startSpan(
    `${req.service.typeName}/${req.method.name}`,
    {
      kind: SpanKind.CLIENT,
      attributes: { "rpc.system": "grpc", "rpc.service": req.service.typeName, "rpc.method": req.method.name },
    },
    trace.setSpanContext(active, parent),
  );
  w3c.inject(trace.setSpan(active, span), req.header, setter);
  let ended = false;
  const end = (e?: unknown) => {
    if (ended) return;
    ended = true;
    endClient(span, e);
  };
  // A reader that stops early (return) does not reach the stream below: the call's abort ends the span.
  req.signal.addEventListener("abort", () => end(req.signal.reason), { once: true });
  let res: Awaited<ReturnType<typeof next>>;
  try {
    res = await next(req);
  } catch (e) {
    end(e);
    throw e;
  }
  if (!res.stream) {
    end();
    return res;
  }
  return { ...res, message: readAhead(res.message, end) };
};

/**
 * The stream with one message read ahead, so `end` runs when the stream
 * does. Connect's client iterators have no return(): a reader that stops at
 * a terminal message (turn_done, an exec's completed) never pulls the end of
 * the stream, and without the read-ahead the span would stay open (and the
 * HTTP/2 stream half-closed) until the call is aborted, if ever.
 */
async function* readAhead<T>(source: AsyncIterable<T>, end: (e?: unknown) => void): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  const pull = () => {
    const next = it.next();
    next.then(
      (r) => r.done && end(),
      (e) => end(e),
    );
    return next;
  };
  let pending = pull();
  for (;;) {
    const r = await pending;
    if (r.done) return;
    pending = pull();
    yield r.value;
  }
}

function unsampled(): SpanContext {
  return {
    traceId: randomBytes(16).toString("hex"),
    spanId: randomBytes(8).toString("hex"),
    traceFlags: TraceFlags.NONE,
  };
}

function endClient(span: Span, e?: unknown): void {
  const code = e === undefined ? 0 : ConnectError.from(e).code;
  span.setAttribute("rpc.grpc.status_code", code);
  if (code !== 0) span.setStatus({ code: SpanStatusCode.ERROR, message: ConnectError.from(e).rawMessage });
  span.end();
}
