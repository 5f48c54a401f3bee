import type * as http from "node:http";
import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { acceptOrGenerateRequestId, acceptOrGenerateTraceId, runWithRequest } from "../context.ts";
import type { Envelope } from "../envelope.ts";
import { retryAfterOf } from "../errors.ts";
import { headerOf, type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";
import { runInTrace, startRequestTrace } from "../tracing/request-trace.ts";
import { tracingEnabled } from "../tracing/start.ts";
import { acceptWaitMs } from "./accept-wait.ts";
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
  /** True once the server is shutting down. */
  closing: () => boolean;
  /** Ends keep-alive connections that are idle (called as requests end during a shutdown). */
  closeIdle: () => void;
  dispatch: (req: NodeRequest, res: NodeResponse) => Promise<void>;
  /** The name of the request's span, once it has ended (the RPC, or the method and route template). */
  spanName?: (req: NodeRequest) => string;
  /**
   * ServerOptions.shed (procedure paths already left out), asked first for
   * an HTTP/1.1 request without an Origin: a refusal is answered here (see
   * earlyRefusals). Requests with an Origin go through CORS and dispatch's
   * own shed step, so a browser's refusal carries its CORS headers.
   */
  shed?: (req: NodeRequest, path: string) => PlatformError | undefined;
}

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
  const rendered = new WeakMap<PlatformError, { status: number; text: string; fixed: (string | number)[] }>();
  const renderOnce = (err: PlatformError) => {
    let r = rendered.get(err);
    if (!r) {
      const { status, body } = o.envelope.render(err);
      const text = JSON.stringify(body);
      const retryAfter = retryAfterOf(err);
      r = {
        status,
        text,
        fixed: [
          "content-type",
          "application/json",
          "content-length",
          Buffer.byteLength(text),
          ...(retryAfter ? ["retry-after", retryAfter] : []),
        ],
      };
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
  return function refuseAsEntered(
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
}

/**
 * Where every HTTP request enters: it gets its request and trace ids (request
 * and response headers, RequestInfo on its async path) and its place in a
 * trace (the W3C traceparent continued, a server span when this process
 * exports; x-trace-id is then the W3C trace id), counts as in flight
 * until its response closes, leaves one access log line, and an exception
 * nothing else caught becomes a bare 500 in the envelope.
 */
export function createRequestEntry(o: RequestEntryOptions): (req: NodeRequest, res: NodeResponse) => void {
  // The closing line holds ids that passed acceptedId, the method, the path,
  // a status and times: nothing a service's redaction (pino's redact, matched
  // against every line) would remove. Without it a line costs ~1.5 us instead
  // of ~12 us here, which each of a storm's thousands of refusals pays on the
  // event loop (issue 15 item 4).
  const access = o.logger.child({}, { redact: [] });
  const refuseEarly = o.shed && earlyRefusals(o);
  return (req, res) => {
    if (refuseEarly && req.httpVersionMajor === 1 && req.headers.origin === undefined) {
      const path = (req.url ?? "/").split("?")[0]!;
      const refusal = o.shed!(req, path);
      if (refusal) return refuseEarly(req as http.IncomingMessage, res as http.ServerResponse, path, refusal);
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
    res.once("close", () => {
      const ms = performance.now() - started;
      o.observe?.(req, res, ms / 1000);
      trace.end({
        name: o.spanName?.(req) ?? req.method ?? "GET",
        status: res.headersSent ? res.statusCode : 499,
        attributes: { "platform.request_id": info.requestId },
      });
      const probe = req.url === "/livez" || req.url === "/healthz" || req.url === "/readyz";
      access[probe ? "debug" : "info"](
        {
          requestId: info.requestId,
          traceId: info.traceId,
          method: req.method,
          path,
          status: res.statusCode,
          ms: Math.round(ms),
          // A connection's first request: how long it waited in this process between accept and the handler.
          ...(acceptMs === undefined ? {} : { acceptMs: Math.round(acceptMs) }),
        },
        "request",
      );
      // Keep-alive connections must not outlive a shutdown once they are idle.
      if (o.closing()) o.closeIdle();
      o.inflight.end();
    });
    runWithRequest(info, () =>
      runInTrace(trace, () => {
        o.dispatch(req, res).catch((err) => {
          info.logger.error({ err }, "request failed");
          if (!res.headersSent) sendJson(res, 500, o.envelope.render(PlatformError.internal()).body);
          else res.destroy();
        });
      }),
    );
  };
}
