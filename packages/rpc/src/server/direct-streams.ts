import type * as http2 from "node:http2";

/** Serves a new HTTP/2 stream itself (true), or leaves it to Node's compatibility layer (false). */
export type StreamTaker = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean;

type StreamListener = (...args: unknown[]) => void;

/**
 * Offers each new stream of `server` to `take` before Node's compatibility
 * layer sees it. Node adds that layer as a `stream` listener of the server
 * when its `request` listener is added (so it is already there): it is moved
 * behind this one, and a stream taken never gets an Http2ServerRequest and
 * Http2ServerResponse, nor a `request` event. Everything else reaches the
 * layer as before, with the same arguments.
 */
export function takeStreamsFirst(server: http2.Http2Server, take: StreamTaker): void {
  const compat = server.listeners("stream") as StreamListener[];
  server.removeAllListeners("stream");
  server.on("stream", function offer(this: http2.Http2Server, ...args: unknown[]) {
    if (take(args[0] as http2.ServerHttp2Stream, args[1] as http2.IncomingHttpHeaders)) return;
    for (const listener of compat) listener.apply(this, args);
  });
}
