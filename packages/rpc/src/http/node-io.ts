import * as http from "node:http";
import type * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { CallController, offerController } from "./adopt.ts";
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

/**
 * Drops the request's Authorization header from the request object (an open
 * stream's request lives as long as the stream, and the credential is
 * checked once, when the call starts). What the handler sees is the call's
 * own Headers, not these.
 */
export function forgetAuthorization(req: NodeRequest): void {
  if (req.headers.authorization === undefined) return;
  if (req.httpVersionMajor !== 1) {
    delete req.headers.authorization;
    // HTTP/2 derives the raw lines from the headers.
    return;
  }
  // A new headers object without it rather than a delete, which turns the
  // object into a dictionary (~0.2 KiB more for as long as the stream is
  // open). IncomingMessage's headers have a setter; Http2ServerRequest's do not.
  const { authorization: _, ...rest } = req.headers;
  (req as http.IncomingMessage).headers = rest;
  // HTTP/1.1 keeps the raw lines too.
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) if (raw[i]!.toLowerCase() === "authorization") raw.splice(i, 2);
}

/**
 * Request headers a caller of the direct transport may give instead of a
 * HeadersInit: made into Headers only if something reads them.
 */
export interface LazyHeaders {
  toHeaders(): Headers;
}

/**
 * A request's headers for the direct transport, made into a Headers object
 * (headersOf) only if the call reads them: a gRPC call whose interceptors
 * and handler never look (identity's VerifyToken) makes none.
 */
export class LazyRequestHeaders implements LazyHeaders {
  constructor(
    private readonly req: NodeRequest,
    private readonly skip: (name: string) => boolean,
  ) {}

  toHeaders(): Headers {
    return headersOf(this.req, this.skip);
  }
}

/** node:_http_outgoing's own key of a response's header map (undefined if this Node has none). */
const kOutHeaders = Object.getOwnPropertySymbols(new http.OutgoingMessage()).find(
  (s) => s.description === "kOutHeaders",
);

/**
 * Lets go of the header map of an HTTP/1.1 response whose head has been
 * sent: Node keeps it (for getHeader) beside the head's text for as long as
 * the response is open, ~0.6 KiB an idle SSE stream (a dictionary of the
 * seven names, an array per header). A getHeader after this finds none.
 */
export function forgetSentHeaders(res: NodeResponse): void {
  if (!kOutHeaders || !(res instanceof http.ServerResponse) || !res.headersSent) return;
  (res as unknown as Record<symbol, unknown>)[kOutHeaders] = null;
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
  return eventOrClose(res, "drain");
}

/** Resolves on the response's next `event` or its close, whichever comes first. */
export function eventOrClose(res: NodeResponse, event: "drain" | "finish"): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off(event, done);
      res.off("close", done);
      resolve();
    };
    res.on(event, done);
    res.on("close", done);
  });
}

/**
 * The abort of one call: its signal aborts when its client goes away before
 * the response was ended, or when a shutdown gives up waiting; `release()`
 * once the call is over. Its controller (a CallController: no AbortSignal
 * is made unless asked for) is the direct transport's call's own, handed
 * to it in place of a signal, or offered with its signal (calls/adopt.ts)
 * when the signal is asked for: the call aborts it too, when it ends or at
 * its deadline, which `byCaller` tells apart. (Whether the response was
 * ended is `writableEnded`: an HTTP/2 response reports `writableFinished`
 * once its stream is gone, answered or not.) An object with methods, not
 * closures: an SSE stream keeps it for hours.
 */
export class CallAbort {
  readonly controller = new CallController();
  /** Aborted by the caller's side (its client gone, a shutdown), not by the call itself. */
  byCaller = false;
  #offered = false;
  readonly #onClose: () => void;

  constructor(
    private readonly res: NodeResponse,
    private readonly shutdown: ShutdownHooks,
  ) {
    this.#onClose = this.closed.bind(this);
    res.on("close", this.#onClose);
    shutdown.attach(this);
  }

  /** The call's signal, offered with its controller to the direct transport (made on first use). */
  get signal(): AbortSignal {
    if (!this.#offered) {
      this.#offered = true;
      offerController(this.controller);
    }
    return this.controller.signal;
  }

  /** The response closed (listener). */
  closed(): void {
    if (!this.res.writableEnded) this.#abort(new ConnectError("client went away", Code.Canceled));
  }

  onShutdown(): void {
    this.#abort(new ConnectError("server shutting down", Code.Unavailable));
  }

  #abort(reason: ConnectError): void {
    if (this.controller.aborted) return;
    this.byCaller = true;
    this.controller.abort(reason);
  }

  /** The call is over: neither the response's close nor a shutdown aborts it any more. */
  release(): void {
    this.res.off("close", this.#onClose);
    this.shutdown.detach(this);
  }
}
