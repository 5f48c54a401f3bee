import type * as http from "node:http";
import type * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ShutdownHooks } from "./shutdown-hooks.ts";

/** A request of either Node HTTP server (HTTP/1.1 or HTTP/2 compatibility API). */
export type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
/** A response of either Node HTTP server. */
export type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** The first value of a request header. */
export function headerOf(req: NodeRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The request's headers as a Headers object, without those `skip` names. */
export function headersOf(req: NodeRequest, skip: (name: string) => boolean): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || skip(k)) continue;
    for (const one of Array.isArray(v) ? v : [v]) h.append(k, one);
  }
  return h;
}

/** Answers `status` with `body` as JSON. */
export function sendJson(res: NodeResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/**
 * Whether the client's side of `res` is gone. An HTTP/2 compatibility
 * response has no `destroyed` of its own: its stream says.
 */
export function isGone(res: NodeResponse): boolean {
  return "stream" in res ? res.stream.destroyed || res.stream.closed : res.destroyed;
}

/** Resolves when `res` can take more bytes or is gone (at once when it already is: no second close comes). */
export function drained(res: NodeResponse): Promise<void> {
  if (isGone(res)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/**
 * The signal of one call: aborted when its client goes away before the
 * response was ended, or when a shutdown gives up waiting. `release` when
 * the call is over. (Whether the response was ended is `writableEnded`: an
 * HTTP/2 response reports `writableFinished` once its stream is gone,
 * answered or not.)
 */
export function callAbort(
  res: NodeResponse,
  shutdown: ShutdownHooks,
): { controller: AbortController; release(): void } {
  const controller = new AbortController();
  // Bound, not a named closure: under tsx (keepNames) a named closure also
  // carries a dictionary of properties, and an SSE stream keeps this one for hours.
  const onClose = abortUnlessEnded.bind(undefined, res, controller);
  res.on("close", onClose);
  const unhook = shutdown.add(() => controller.abort(new ConnectError("server shutting down", Code.Unavailable)));
  return {
    controller,
    release() {
      res.off("close", onClose);
      unhook();
    },
  };
}

function abortUnlessEnded(res: NodeResponse, controller: AbortController): void {
  if (!res.writableEnded) controller.abort(new ConnectError("client went away", Code.Canceled));
}
