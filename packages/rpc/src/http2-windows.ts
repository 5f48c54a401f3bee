import type * as http2 from "node:http2";

/**
 * HTTP/2 flow-control windows. The protocol's 64 KiB default makes a
 * streamed exec output wait for a WINDOW_UPDATE every 64 KiB; these only
 * allow more bytes in flight, they allocate nothing up front.
 */
export const HTTP2_STREAM_WINDOW = 1 << 20;
export const HTTP2_CONNECTION_WINDOW = 8 << 20;

export function widenConnectionWindow(session: http2.Http2Session): void {
  const apply = () => session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW);
  if (session.connecting) session.once("connect", apply);
  else apply();
}
