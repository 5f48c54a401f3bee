import type * as http2 from "node:http2";

/**
 * HTTP/2 flow-control windows. The protocol's 64 KiB default makes a
 * streamed exec output wait for a WINDOW_UPDATE every 64 KiB; these only
 * allow more bytes in flight, they allocate nothing up front.
 */
export const HTTP2_STREAM_WINDOW = 1 << 20;
export const HTTP2_CONNECTION_WINDOW = 8 << 20;

/** Raises an HTTP/2 session's connection window so one stream's unread data cannot stall the others. */
export function widenConnectionWindow(session: http2.Http2Session): void {
  const apply = () => session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW);
  if (session.connecting) session.once("connect", apply);
  else apply();
}

/**
 * Node's per-connection memory limit, in MB, for servers and service clients.
 * Node counts the bytes queued behind flow control in it and refuses every
 * new stream (RST_STREAM ENHANCE_YOUR_CALM) while it is over; its default,
 * 10, is passed by one 8 MiB file chunk that its reader has not yet taken, so
 * a second file call on the same connection failed. 128 holds sixteen such
 * chunks; the concurrent-streams limit still bounds a connection's work.
 */
export const HTTP2_SESSION_MEMORY_MB = 128;
