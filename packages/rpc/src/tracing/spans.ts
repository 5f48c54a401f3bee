import { type Attributes, context, type Span, SpanStatusCode, trace } from "@opentelemetry/api";
import { PlatformError } from "@platform/errors";
import { TRACER_NAME } from "./request-trace.ts";
import { tracingEnabled } from "./start.ts";

/**
 * A span the services start around their own work (a model call, a tool
 * call, a sandbox's creation): a child of the active span, a no-op when the
 * process does not export. Only what the services need, so they do not
 * depend on the OpenTelemetry API themselves.
 */
export interface WorkSpan {
  /** Adds attributes (token counts, an exit code) known after the start. */
  set(attributes: Attributes): void;
  /** Marks the work failed: a server-side fault, not a caller's. */
  fail(err: unknown): void;
  end(): void;
  /** Runs `fn` with this span active: spans and calls made in it are its children. */
  run<T>(fn: () => T): T;
}

const none: WorkSpan = { set: () => {}, fail: () => {}, end: () => {}, run: (fn) => fn() };

/** A child span of the current trace for a piece of work (a no-op when tracing is off or no trace is active). */
export function startWorkSpan(name: string, attributes?: Attributes): WorkSpan {
  if (!tracingEnabled()) return none;
  const active = context.active();
  if (!trace.getSpanContext(active)) return none;
  const span: Span = trace.getTracer(TRACER_NAME).startSpan(name, { attributes }, active);
  const inside = trace.setSpan(active, span);
  return {
    set: (a) => span.setAttributes(a),
    fail(err) {
      const message = err instanceof Error ? err.message : String(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message });
      if (err instanceof PlatformError) span.setAttribute("error.type", err.reason);
      else span.setAttribute("error.type", err instanceof Error ? err.name : "error");
    },
    end: () => span.end(),
    run: (fn) => context.with(inside, fn),
  };
}

/** `fn` in a work span that ends when it settles (failed if it throws). */
export async function inWorkSpan<T>(
  name: string,
  attributes: Attributes | undefined,
  fn: (span: WorkSpan) => Promise<T>,
): Promise<T> {
  const span = startWorkSpan(name, attributes);
  try {
    return await span.run(() => fn(span));
  } catch (e) {
    span.fail(e);
    throw e;
  } finally {
    span.end();
  }
}
