import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { runWithRequest } from "../context.ts";
import type { Envelope } from "../envelope.ts";
import { headerOf, type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";
import { runInTrace, startRequestTrace } from "../tracing/request-trace.ts";
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
  return (req, res) => {
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
