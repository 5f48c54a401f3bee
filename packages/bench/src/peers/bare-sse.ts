import * as http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The least a Node SSE server can be: node:http, GET /events answered 200
 * with the same headers as our streams (text/event-stream, no-cache,
 * x-accel-buffering: no), one event at once, then only the heartbeat our
 * servers send (`: ping` every `pingMs`, one timer for all open streams, as
 * @platform/rpc's SsePinger does). No routing, no authentication, no
 * session, no log: the floor our memory per idle stream is compared with.
 */
export async function startBareSse(
  host: string,
  pingMs = 15_000,
): Promise<{ url: string; open(): number; close(): Promise<void> }> {
  const open = new Set<http.ServerResponse>();
  let timer: NodeJS.Timeout | undefined;
  const server = http.createServer((req, res) => {
    if (req.method !== "GET" || req.url !== "/events") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" });
    res.write('event: open\ndata: {"ok":true}\n\n');
    open.add(res);
    timer ??= setInterval(() => {
      for (const r of open) r.write(": ping\n\n");
    }, pingMs).unref();
    res.on("close", () => {
      open.delete(res);
      if (open.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    open: () => open.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const r of open) r.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
