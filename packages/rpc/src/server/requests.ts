import * as http from "node:http";
import type * as net from "node:net";
import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { acceptOrGenerateRequestId, acceptOrGenerateTraceId, type RequestInfo, runWithRequest } from "../context.ts";
import type { Envelope } from "../envelope.ts";
import { retryAfterOf } from "../errors.ts";
import { headerOf, type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";
import { runInTrace, startRequestTrace } from "../tracing/request-trace.ts";
import { tracingEnabled } from "../tracing/start.ts";
import { acceptWaitMs } from "./accept-wait.ts";
import { parseFirstHead, type RequestHead } from "./first-request.ts";
import type { Inflight } from "./inflight.ts";
import type { MakeRequestInfo } from "./request-info.ts";

export interface RequestEntryOptions {
  logger: Logger;
  envelope: Envelope;
  makeInfo: MakeRequestInfo;
  /** The caller's service name on an internal (mutual TLS) listener. */
  callerOf: (req: NodeRequest) => string | undefined;
  inflight: Inflight;
  /** Records the ended request (metrics), with its time in seconds. */
  observe?: (req: NodeRequest, res: NodeResponse, seconds: number) => void;
  /** Records a request refused from its connection's first bytes (refuseFirst: no NodeRequest was made). */
  observeHead?: (head: RequestHead, status: number, seconds: number) => void;
  /** True once the server is shutting down. */
  closing: () => boolean;
  /** Ends keep-alive connections that are idle (called as requests end during a shutdown). */
  closeIdle: () => void;
  dispatch: (req: NodeRequest, res: NodeResponse) => Promise<void>;
  /** ServerOptions.asyncRequestContext: the RequestInfo is also the current request on the call's async path. */
  asyncRequestContext: boolean;
  /** The name of the request's span, once it has ended (the RPC, or the method and route template). */
  spanName?: (req: NodeRequest) => string;
  /**
   * ServerOptions.shed (procedure paths already left out), asked first for
   * an HTTP/1.1 request without an Origin: a refusal is answered here (see
   * earlyRefusals). Requests with an Origin go through CORS and dispatch's
   * own shed step, so a browser's refusal carries its CORS headers.
   */
  shed?: (req: RequestHead, path: string) => PlatformError | undefined;
}

/** Where every request enters; with `shed`, also the refusal of a new connection's first request (see refuseFirst). */
export type RequestEntry = ((req: NodeRequest, res: NodeResponse) => void) & {
  /**
   * Offered the first bytes of a new HTTP/1.1 connection (connections.ts)
   * before the HTTP parser sees them: true when they hold a request `shed`
   * refuses, and it was answered and the connection ended (the rest of what
   * the client sends is read and dropped until it closes).
   */
  refuseFirst?: (socket: net.Socket, bytes: Buffer) => boolean;
};

/** How often at most the log says how many requests were refused before routing. */
export const REFUSALS_LOG_MS = 1000;

/**
 * Answers a request that ServerOptions.shed refuses before anything else is
 * made for it: no RequestInfo, async context, close listener or access log
 * line of its own, and a response rendered once per refusal error. A storm's
 * clients wait in the listen queue for the event loop's time per request
 * (issue 15 item 4: 2,000 concurrent logins cost the loop ~0.68 ms each, and
 * the last refusal left only after the whole storm's work). What stays is
 * what a client or an operator sees: the status, envelope body and
 * Retry-After the handler's own refusal would give, x-request-id and
 * x-trace-id, the span when this process exports, the HTTP metrics, and one
 * log line per path and status each REFUSALS_LOG_MS saying how many were
 * refused (and the slowest), instead of one line each.
 */
function earlyRefusals(o: RequestEntryOptions) {
  const rendered = new WeakMap<
    PlatformError,
    { status: number; text: string; fixed: (string | number)[]; rawHead: string }
  >();
  const renderOnce = (err: PlatformError) => {
    let r = rendered.get(err);
    if (!r) {
      const { status, body } = o.envelope.render(err);
      const text = JSON.stringify(body);
      const retryAfter = retryAfterOf(err);
      const fixed = [
        "content-type",
        "application/json",
        "content-length",
        Buffer.byteLength(text),
        ...(retryAfter ? ["retry-after", retryAfter] : []),
      ];
      let rawHead = `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? "Unknown"}\r\n`;
      for (let i = 0; i < fixed.length; i += 2) rawHead += `${fixed[i]}: ${fixed[i + 1]}\r\n`;
      r = { status, text, fixed, rawHead };
      rendered.set(err, r);
    }
    return r;
  };
  const counts = new Map<string, { method: string; path: string; status: number; count: number; maxMs: number }>();
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    for (const c of counts.values())
      o.logger.info({ ...c, maxMs: Math.ceil(c.maxMs) }, "requests refused before routing");
    counts.clear();
  };
  const count = (method: string, path: string, status: number, ms: number) => {
    const key = `${status} ${method} ${path}`;
    const c = counts.get(key);
    if (c) {
      c.count++;
      if (ms > c.maxMs) c.maxMs = ms;
    } else counts.set(key, { method, path: path.slice(0, 200), status, count: 1, maxMs: ms });
    if (!scheduled) {
      scheduled = true;
      setTimeout(flush, REFUSALS_LOG_MS);
    }
  };
  let date = "";
  let dateSecond = -1;
  /** Node's Date header for the current second (made once a second, as Node's own is). */
  const dateNow = () => {
    const second = Math.floor(Date.now() / 1000);
    if (second !== dateSecond) {
      dateSecond = second;
      date = new Date(second * 1000).toUTCString();
    }
    return date;
  };
  /**
   * A new connection's first request, refused from its bytes: no HTTP parser,
   * IncomingMessage, ServerResponse or keep-alive bookkeeping is made for it,
   * which is most of what a storm's refusal costs (issue 15 item 4: a bare
   * node:http server answering 503 spent ~0.28 ms of CPU a connection, a raw
   * socket answering the same ~0.15 ms). Only for a head parseFirstHead reads
   * whole and strictly, without an Origin (CORS decides those) and without a
   * trace to continue or export; anything else goes the HTTP parser's way.
   * The answer is the early refusal's (status, envelope body, Retry-After,
   * ids, metrics, the counted log line) with `connection: close`: the client
   * sent one request and gets one answer, and the connection ends without a
   * keep-alive to hold it. The connection is read to its end so the answer is
   * not lost to a reset from unread bytes.
   */
  const refuseFirst = (socket: net.Socket, bytes: Buffer): boolean => {
    const started = performance.now();
    const head = parseFirstHead(bytes);
    if (!head || head.headers.origin !== undefined) return false;
    if (head.headers.traceparent !== undefined || tracingEnabled()) return false;
    const path = head.url!.split("?")[0]!;
    const err = o.shed!(head, path);
    if (!err) return false;
    const r = renderOnce(err);
    const requestId = acceptOrGenerateRequestId(head.headers["x-request-id"] as string | undefined);
    const traceId = acceptOrGenerateTraceId(head.headers["x-trace-id"] as string | undefined);
    socket.end(
      `${r.rawHead}x-request-id: ${requestId}\r\nx-trace-id: ${traceId}\r\ndate: ${dateNow()}\r\nconnection: close\r\n\r\n${r.text}`,
    );
    // Drained, not read: a reset for unread bytes could overtake the answer.
    socket.resume();
    const ms = performance.now() - started;
    o.observeHead?.(head, r.status, ms / 1000);
    count(head.method!, path, r.status, ms);
    return true;
  };
  const refuseAsEntered = function refuseAsEntered(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    err: PlatformError,
  ) {
    const started = performance.now();
    // Drained unread, so a kept-alive connection stays usable.
    req.resume();
    const method = req.method ?? "GET";
    const clientTraceId = headerOf(req, "x-trace-id");
    // Without a traceparent and a span to export there is no trace to continue: skip the propagator.
    const trace =
      req.headers.traceparent === undefined && !tracingEnabled()
        ? undefined
        : startRequestTrace(req.headers, method, path, clientTraceId);
    const requestId = acceptOrGenerateRequestId(headerOf(req, "x-request-id"));
    const traceId = trace?.traceId ?? acceptOrGenerateTraceId(clientTraceId);
    const r = renderOnce(err);
    const headers = [...r.fixed, "x-request-id", requestId, "x-trace-id", traceId];
    if (o.closing()) headers.push("connection", "close");
    res.writeHead(r.status, headers);
    res.end(r.text);
    const ms = performance.now() - started;
    o.observe?.(req, res, ms / 1000);
    trace?.end({
      name: o.spanName?.(req) ?? method,
      status: r.status,
      attributes: { "platform.request_id": requestId },
    });
    count(method, path, r.status, ms);
    // Keep-alive connections must not outlive a shutdown once they are idle.
    if (o.closing()) res.once("close", () => o.closeIdle());
  };
  return { refuseAsEntered, refuseFirst };
}

const kEnd = Symbol("platform.requestEnd");
type Ending = NodeResponse & { [kEnd]?: RequestEnd };

/** The RequestInfo the entry made for the request `res` answers, until the response closes. */
export function requestInfoOf(res: NodeResponse): RequestInfo | undefined {
  return (res as Ending)[kEnd]?.info;
}

/** A response's close (listener): its request's end, once. One function for every response. */
function endRequest(this: Ending): void {
  const end = this[kEnd];
  this[kEnd] = undefined;
  end?.closed();
}

/**
 * What the end of a request records once its response closes: the HTTP
 * metrics, the span and the access log line. An object on the response, not
 * a closure over the entry's frame (and the once-wrapper around it): an SSE
 * response stays open for hours, and each kept ~0.4 KiB.
 */
class RequestEnd {
  constructor(
    private readonly o: RequestEntryOptions,
    private readonly access: Logger,
    private readonly req: NodeRequest,
    private readonly res: NodeResponse,
    private readonly started: number,
    private readonly acceptMs: number | undefined,
    private readonly path: string,
    private readonly trace: ReturnType<typeof startRequestTrace>,
    readonly info: RequestInfo,
  ) {}

  closed(): void {
    const { o, req, res, info } = this;
    const ms = performance.now() - this.started;
    o.observe?.(req, res, ms / 1000);
    this.trace.end({
      name: o.spanName?.(req) ?? req.method ?? "GET",
      status: res.headersSent ? res.statusCode : 499,
      attributes: { "platform.request_id": info.requestId },
    });
    const probe = req.url === "/livez" || req.url === "/healthz" || req.url === "/readyz";
    this.access[probe ? "debug" : "info"](
      {
        requestId: info.requestId,
        traceId: info.traceId,
        method: req.method,
        path: this.path,
        status: res.statusCode,
        ms: Math.round(ms),
        // A connection's first request: how long it waited in this process between accept and the handler.
        ...(this.acceptMs === undefined ? {} : { acceptMs: Math.round(this.acceptMs) }),
      },
      "request",
    );
    // Keep-alive connections must not outlive a shutdown once they are idle.
    if (o.closing()) o.closeIdle();
    o.inflight.end();
  }
}

/**
 * Where every HTTP request enters: it gets its request and trace ids (request
 * and response headers, RequestInfo on its async path) and its place in a
 * trace (the W3C traceparent continued, a server span when this process
 * exports; x-trace-id is then the W3C trace id), counts as in flight
 * until its response closes, leaves one access log line, and an exception
 * nothing else caught becomes a bare 500 in the envelope.
 */
export function createRequestEntry(o: RequestEntryOptions): RequestEntry {
  // The closing line holds ids that passed acceptedId, the method, the path,
  // a status and times: nothing a service's redaction (pino's redact, matched
  // against every line) would remove. Without it a line costs ~1.5 us instead
  // of ~12 us here, which each of a storm's thousands of refusals pays on the
  // event loop (issue 15 item 4).
  const access = o.logger.child({}, { redact: [] });
  const early = o.shed ? earlyRefusals(o) : undefined;
  const entry: RequestEntry = (req, res) => {
    if (early && req.httpVersionMajor === 1 && req.headers.origin === undefined) {
      const path = (req.url ?? "/").split("?")[0]!;
      const refusal = o.shed!(req, path);
      if (refusal) return early.refuseAsEntered(req as http.IncomingMessage, res as http.ServerResponse, path, refusal);
    }
    const started = performance.now();
    const acceptMs = acceptWaitMs(req.socket, started);
    o.inflight.begin();
    const path = (req.url ?? "").split("?")[0] ?? "";
    const clientTraceId = headerOf(req, "x-trace-id");
    const trace = startRequestTrace(req.headers, req.method ?? "GET", path, clientTraceId);
    const info = o.makeInfo(headerOf(req, "x-request-id"), trace.traceId ?? clientTraceId, o.callerOf(req));
    info.traceParent = trace.parent;
    info.remoteAddress = req.socket?.remoteAddress;
    req.headers["x-request-id"] = info.requestId;
    req.headers["x-trace-id"] = info.traceId;
    res.setHeader("x-request-id", info.requestId);
    res.setHeader("x-trace-id", info.traceId);
    if (o.closing() && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    (res as Ending)[kEnd] = new RequestEnd(o, access, req, res, started, acceptMs, path, trace, info);
    res.on("close", endRequest);
    const serve = () =>
      runInTrace(trace, () => {
        o.dispatch(req, res).catch((err) => {
          info.logger.error({ err }, "request failed");
          if (!res.headersSent) sendJson(res, 500, o.envelope.render(PlatformError.internal()).body);
          else res.destroy();
        });
      });
    if (o.asyncRequestContext) runWithRequest(info, serve);
    else serve();
  };
  if (early) entry.refuseFirst = early.refuseFirst;
  return entry;
}
