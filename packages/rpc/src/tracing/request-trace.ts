import type { IncomingHttpHeaders } from "node:http";
import {
  type Attributes,
  type Context,
  context,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { isW3cTraceId, withPreferredTraceId } from "./preferred-id.ts";
import { tracingEnabled } from "./start.ts";

/** W3C trace context, used directly: a service that does not export still reads and passes `traceparent` on. */
export const w3c = new W3CTraceContextPropagator();

export const TRACER_NAME = "@platform/rpc";

/** Paths that get no span: probes and scrapes come every few seconds and say nothing about a request. */
function untraced(path: string): boolean {
  return (
    path === "/livez" ||
    path === "/healthz" ||
    path === "/readyz" ||
    path === "/metrics" ||
    path.startsWith("/grpc.health.v1.Health/")
  );
}

/** No span to end. One function for all requests (it lives as long as the request: an SSE stream's, hours). */
function untracedEnd(): void {}

/** A request's place in a trace, from its `traceparent` and (when this process exports) its server span. */
export interface RequestTrace {
  /** The W3C trace id, when a traceparent came in or a span was started; what x-trace-id becomes. */
  traceId: string | undefined;
  /** What the request's code runs in: its span, or the caller's remote one when this process does not export. */
  context: Context;
  /** What calls made for the request continue from, whether or not this process exports. */
  parent: SpanContext | undefined;
  /** Ends the server span (if any) with the response's outcome. */
  end(outcome: { name: string; status: number; attributes?: Attributes }): void;
}

/**
 * The request's trace: the incoming W3C `traceparent` is continued (its trace
 * id is the request's x-trace-id); when this process exports spans, one
 * server span per request is started. A client's `x-trace-id` that is itself
 * a W3C trace id becomes the trace id of a new root span, so the id it sent
 * is the one it finds its trace under.
 */
export function startRequestTrace(
  headers: IncomingHttpHeaders,
  method: string,
  path: string,
  clientTraceId: string | undefined,
): RequestTrace {
  const incoming = w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  const remote = trace.getSpanContext(incoming);
  if (!tracingEnabled() || untraced(path)) {
    return { traceId: remote?.traceId, context: incoming, parent: remote, end: untracedEnd };
  }
  const span: Span = withPreferredTraceId(remote || !isW3cTraceId(clientTraceId) ? undefined : clientTraceId, () =>
    trace
      .getTracer(TRACER_NAME)
      .startSpan(method, { kind: SpanKind.SERVER, attributes: { "http.request.method": method } }, incoming),
  );
  const own = span.spanContext();
  return {
    traceId: own.traceId,
    context: trace.setSpan(incoming, span),
    parent: own,
    end({ name, status, attributes }) {
      span.updateName(name);
      span.setAttribute("http.response.status_code", status);
      if (attributes) span.setAttributes(attributes);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}

/** Runs `fn` in the request's trace context (the active context for spans and outgoing calls). */
export function runInTrace<T>(t: RequestTrace, fn: () => T): T {
  return context.with(t.context, fn);
}
