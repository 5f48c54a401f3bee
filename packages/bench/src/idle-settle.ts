import type { ChildStats, ServiceProcess } from "./host/service-process.ts";

/**
 * How long a service process idles after a burst of opens before its memory
 * is read. V8's memory reducer compacts the old space the burst left 20-30 s
 * after it (a trace at 2 s steps, load 5: agents RSS 411 MiB until +24 s,
 * 307 at +26 s, 276-282 after, live heap 137-146 MiB throughout); a plain
 * gc() does not compact it, and Node 20's V8 ignores gc()'s last-resort
 * flavor. Read earlier, RSS counts the burst's garbage.
 */
export const SETTLE_MS = 40_000;

export interface Settled {
  /** `earlyMs` into the window (before the compaction), when asked for. */
  early?: ChildStats;
  /** At the end of the window, before the GC: its CPU and event-loop lag are the idle window's. */
  idle: ChildStats;
  /** After a GC at the end of the window: the memory to report. */
  after: ChildStats;
}

/**
 * Lets `svc` idle `idleMs` (nothing sent; only its own timers run), then
 * collects its garbage and reads its memory. The sse-streams figure, its
 * bare peer and the SSE memory curve read memory so, at the same point of
 * V8's cycle.
 */
export async function settle(svc: ServiceProcess, idleMs = SETTLE_MS, earlyMs?: number): Promise<Settled> {
  let early: ChildStats | undefined;
  if (earlyMs !== undefined && earlyMs < idleMs) {
    await sleep(earlyMs);
    early = await svc.stats();
    await sleep(idleMs - earlyMs);
  } else await sleep(idleMs);
  const idle = await svc.stats();
  await svc.request("gc");
  return { early, idle, after: await svc.stats() };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
