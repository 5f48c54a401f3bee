import * as http from "node:http";
import type * as net from "node:net";

/**
 * A keep-alive agent that drops a pooled socket before the server closes it.
 * Node 20's servers announce `Keep-Alive: timeout=5` and close an idle
 * connection 6 s after its last answer (5 s plus a second's margin), and an
 * agent lets the announced time shorten its own socket timeout (to 4 s) only
 * when it has one: without `timeout`, a pooled socket is kept until the
 * server's close arrives, and a request sent on it in the same millisecond
 * is reset (`read ECONNRESET` on a socket idle ~6,012 ms, seen in the
 * mixed-load figure's lanes and probe; reproduced against a bare
 * http.Server). The timeout itself only marks a busy socket idle that long
 * (no request is ended by it); SSE streams are pinged well within it.
 */
export function keepAliveAgent(maxSockets: number): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, timeout: 60_000 });
}

const freedAt = new WeakMap<net.Socket, number>();
const watched = new WeakSet<http.Agent>();

/** Remembers when `agent` puts each socket back in its free pool, for `annotateErrors`. */
export function stampFrees(agent: http.Agent): void {
  if (watched.has(agent)) return;
  watched.add(agent);
  agent.on("free", (socket: net.Socket) => freedAt.set(socket, performance.now()));
}

/**
 * Adds to `req`'s errors what tells a kept-alive socket's reuse race (the
 * server closed its idle connection as the request went out: Node's
 * documented ECONNRESET) from a server that failed a request: whether the
 * socket was reused, how long it had sat idle in the pool, and whether any
 * of the answer had arrived. A load figure's error line then says which.
 */
export function annotateErrors(req: http.ClientRequest): void {
  let idleMs: number | undefined;
  req.once("socket", (socket: net.Socket) => {
    const at = freedAt.get(socket);
    if (at !== undefined) idleMs = performance.now() - at;
  });
  let answered = false;
  req.once("response", () => (answered = true));
  const annotate = (err: Error) => {
    const how = req.reusedSocket ? `kept-alive socket idle ${idleMs?.toFixed(0) ?? "?"} ms` : "new connection";
    err.message += ` (${how}, ${answered ? "during the answer" : "before any answer"})`;
  };
  req.prependOnceListener("error", annotate);
  req.once("response", (res) => res.prependOnceListener("error", annotate));
}
