// When a connection was accepted, so a request's log line can say how long its
// connection waited inside the process before the request reached the handler
// (accept, TLS handshake, protocol sniffing, header parsing): the part of a
// client's latency that the handler's own time does not show. A symbol
// property, as HTTP/2 requests see their socket through a proxy that forwards
// reads (a WeakMap keyed by the socket would miss).
const ACCEPTED = Symbol("platform.acceptedAt");

type Stamped = { [ACCEPTED]?: number };

/** Stamps `socket` with the time it was accepted (the first stamp holds). */
export function stampAccepted(socket: object): void {
  (socket as Stamped)[ACCEPTED] ??= performance.now();
}

/**
 * Milliseconds from the accept of the request's connection to `now`, for the
 * first request of that connection only (later requests on a kept-alive
 * connection waited on their client, not on the server); undefined otherwise.
 */
export function acceptWaitMs(socket: unknown, now: number): number | undefined {
  const s = socket as Stamped | null | undefined;
  const at = s?.[ACCEPTED];
  if (at === undefined || at < 0) return undefined;
  s![ACCEPTED] = -1;
  return now - at;
}
