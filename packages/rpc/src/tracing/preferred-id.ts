let preferred: string | undefined;

/**
 * Starts `fn` (which starts a root span) with `traceId` as the trace id the
 * id generator hands out next: a client that sent `x-trace-id` as a W3C
 * trace id, and no traceparent, finds the request's spans under that id.
 * startSpan calls the generator synchronously, so a module variable set
 * around that one call is enough. Kept apart from the generator so the
 * request path does not load the SDK when tracing is off.
 */
export function withPreferredTraceId<T>(traceId: string | undefined, fn: () => T): T {
  preferred = traceId;
  try {
    return fn();
  } finally {
    preferred = undefined;
  }
}

/** The trace id withPreferredTraceId set, once. */
export function takePreferredTraceId(): string | undefined {
  const id = preferred;
  preferred = undefined;
  return id;
}

/** A W3C trace id: 32 lowercase hex digits, not all zero. */
export function isW3cTraceId(value: string | undefined | null): value is string {
  return !!value && /^[0-9a-f]{32}$/.test(value) && !/^0+$/.test(value);
}
