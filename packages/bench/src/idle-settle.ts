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
  /** After a plain GC at the end of the window: what V8's own cycle left. */
  after: ChildStats;
  /**
   * After a compacting GC (host/compact-gc.ts) that follows: the memory to
   * report. How much of a burst's sparse old space the memory reducer has
   * evacuated by the end of the window varies from run to run (at 10,000
   * streams 20 B to 3 KiB of free heap a stream at one tree); this reading
   * holds what the streams keep, on compacted pages, in every process alike.
   */
  compacted: ChildStats;
}

/**
 * Lets `svc` idle `idleMs` (nothing sent; only its own timers run), then
 * collects its garbage and reads its memory, then compacts and reads again. The sse-streams figure, its
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
  const after = await svc.stats();
  await svc.request("gc", 60_000, { compact: true });
  return { early, idle, after, compacted: await svc.stats() };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
