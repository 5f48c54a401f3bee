import { AsyncLocalStorage } from "node:async_hooks";
import { randomFillSync, randomUUID } from "node:crypto";
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { SpanContext } from "@opentelemetry/api";
import type { Logger } from "pino";

/** Per-request values the server sets before any interceptor or handler runs. */
export interface RequestInfo {
  requestId: string;
  traceId: string;
  /** Child logger bound to requestId, traceId and the procedure. */
  logger: Logger;
  /** The peer's address on the socket (what a login throttle keys on); unset for in-process calls. */
  remoteAddress?: string;
  /**
   * On an internal (mutual TLS) listener: the service name of the client
   * certificate the connection was made with. Undefined elsewhere.
   */
  caller?: string;
  /**
   * Where the request sits in a trace (its server span, or the caller's when
   * this process does not export): what calls made for it continue from.
   */
  traceParent?: SpanContext;
}

/** Context key of the RequestInfo: `ctx.values.get(requestInfoKey)`. */
export const requestInfoKey = createContextKey<RequestInfo | undefined>(undefined, {
  description: "@platform/rpc request info",
});

const store = new AsyncLocalStorage<RequestInfo>();

/** The RequestInfo of the request being served on this async path, if any. */
export function currentRequest(): RequestInfo | undefined {
  return store.getStore();
}

/** Request info of a handler context (falls back to the async-local one). */
export function requestInfo(ctx?: HandlerContext): RequestInfo | undefined {
  return ctx?.values.get(requestInfoKey) ?? store.getStore();
}

/** Runs `fn` with `info` as the current request (its ids reach log lines and outgoing calls). */
export function runWithRequest<T>(info: RequestInfo, fn: () => T): T {
  return store.run(info, fn);
}

// Accept ids a client sends if they are short printable tokens; anything else
// is replaced, so a hostile header cannot break log lines or header values.
const idPattern = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The id a client sent, if it is a short printable token; else undefined.
 * The one rule for request and trace ids, whether they come as headers or
 * in a message (runtime's InvokeRequest echo fields): anything else could
 * not be set on an outgoing call (Headers take Latin-1 only) or would break
 * log lines.
 */
export function acceptedId(value: string | null | undefined): string | undefined {
  return value && idPattern.test(value) ? value : undefined;
}

/** The client's x-request-id when it is well-formed, else a new UUID. */
export function acceptOrGenerateRequestId(value: string | null | undefined): string {
  return acceptedId(value) ?? randomUUID();
}

/** The client's x-trace-id when it is well-formed, else a new 128-bit hex id. */
export function acceptOrGenerateTraceId(value: string | null | undefined): string {
  return acceptedId(value) ?? randomTraceId();
}

// Trace ids come from a pool filled 4 KiB at a time: randomBytes(16) per
// request was ~5 % of the event loop's time for a storm of refused logins.
const idPool = Buffer.alloc(4096);
let idOffset = idPool.length;
/** 16 random bytes as 32 hex digits (a W3C trace id; all zeros has odds 2^-128). */
export function randomTraceId(): string {
  if (idOffset + 16 > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  idOffset += 16;
  return idPool.toString("hex", idOffset - 16, idOffset);
}
