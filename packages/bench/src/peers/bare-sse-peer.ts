import * as http from "node:http";
import { ServiceProcess } from "../host/service-process.ts";
import { settle } from "../idle-settle.ts";

/**
 * The bare Node SSE server (bare-sse.ts) in a process of its own holding
 * `streams` idle streams, opened from this process as the sse-streams figure
 * opens ours (one HTTP/1.1 connection each, `inFlight` opens at a time, each
 * held from its first event). Memory per stream from the server's RSS after a
 * compacting GC before and after the idle window of `idleMs` (also read
 * after the window's plain GC); lag over that window.
 */
export async function bareSsePeer(
  streams: number,
  idleMs: number,
  inFlight = 25,
): Promise<{
  held: number;
  perStream: number;
  /** RSS per stream after the idle window's plain GC, before the compacting one. */
  perStreamIdle: number;
  heapPerStream: number;
  /** V8's free heap space and the RSS outside V8's heap, per stream. */
  freePerStream: number;
  nativePerStream: number;
  lagP99Ms: number;
  rssBefore: number;
  rssAfter: number;
}> {
  const svc = await ServiceProcess.start("bare-sse", { HOST: "127.0.0.1" });
  const url = `${svc.urls.url}/events`;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const requests: http.ClientRequest[] = [];
  const open = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.get(url, { agent, headers: { accept: "text/event-stream" } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`bare SSE server: ${res.statusCode}`));
        res.once("data", () => resolve());
        res.on("error", () => {});
      });
      req.on("error", reject);
      requests.push(req);
    });
  try {
    await svc.request("gc", 60_000, { compact: true });
    const before = await svc.stats();
    let started = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (started < streams) {
          started++;
          await open();
        }
      }),
    );
    await svc.request("resetLag");
    const { idle, after: plain, compacted: after } = await settle(svc, idleMs);
    const held = await svc.request<number>("open");
    if (held !== streams) throw new Error(`the bare SSE server holds ${held} streams of ${streams}`);
    return {
      held,
      perStream: (after.rss - before.rss) / held,
      perStreamIdle: (plain.rss - before.rss) / held,
      heapPerStream: (after.heapUsed - before.heapUsed) / held,
      freePerStream: (after.heapTotal - after.heapUsed - (before.heapTotal - before.heapUsed)) / held,
      nativePerStream: (after.rss - after.heapTotal - (before.rss - before.heapTotal)) / held,
      lagP99Ms: idle.lagP99Ms,
      rssBefore: before.rss,
      rssAfter: after.rss,
    };
  } finally {
    for (const req of requests) req.destroy();
    agent.destroy();
    await svc.stop();
  }
}
