import type { Figure } from "../figure.ts";
import { bareSsePeer } from "../peers/bare-sse-peer.ts";
import { fmtBytes } from "../stats.ts";
import { SETTLE_MS, settle } from "../idle-settle.ts";
import { SseHolder } from "../sse-holder.ts";

/** The idle window of the full run (see idle-settle.ts), and when its early RSS is read (what the figure measured until 2026-11-27). */
const IDLE_MS = SETTLE_MS;
const IDLE_EARLY_MS = 10_000;
/**
 * Idle SSE streams held by one agents process: one session whose run waits
 * forever (the `bench/idle` model) and N followers on
 * GET /v1/sessions/{id}/events, each its own HTTP/1.1 connection. Memory per
 * stream from the agents process's RSS (after a compacting GC) before and
 * after, as its peer's and the SSE memory curve's; lag from
 * its own event-loop delay histogram while the streams sit idle.
 */
export const sseStreams: Figure = {
  id: "sse-streams",
  title: "open SSE streams held by one agents process",
  goal: "10,000 idle, ≤ 50 KB each, event-loop lag p99 ≤ 20 ms",
  // It starts a process of its own (the bare SSE peer).
  quickTimeoutMs: 90_000,
  // 60 s of opens at most, two idle windows (ours, the peer's) and the peer's opens.
  fullTimeoutMs: 240_000,
  async run(stack, size) {
    const agents = await stack.agents();
    const { access_token: token } = await stack.login();
    const sessionId = await stack.newSession(token, "bench/idle");
    const base = new URL(agents.urls.url!);
    const holder = new SseHolder(base, token);
    const target = size === "quick" ? 50 : 10_000;
    let opened = 0;
    let error: string | undefined;
    try {
      await holder.openIdleRun(sessionId);
      opened = 1;
      await agents.request("gc", 60_000, { compact: true });
      const before = await agents.stats();
      const t0 = performance.now();
      const batch = 25;
      const openBudgetMs = size === "quick" ? 10_000 : 60_000;
      const from = opened;
      await holder.follow(
        sessionId,
        batch,
        (started) => from + started < target && performance.now() - t0 < openBudgetMs,
        () => opened++,
      );
      const openSeconds = (performance.now() - t0) / 1000;
      // Idle window: nothing is sent; only what the process does on its own runs. The peer idles as long.
      await agents.request("resetLag");
      const {
        early,
        idle,
        after: plain,
        compacted: after,
      } = size === "quick" ? await settle(agents, 500) : await settle(agents, IDLE_MS, IDLE_EARLY_MS);
      const perStream = (after.rss - before.rss) / (opened - 1);
      const perStreamIdle = (plain.rss - before.rss) / (opened - 1);
      const heapPerStream = (after.heapUsed - before.heapUsed) / (opened - 1);
      // RSS beside the live heap: V8's free space (committed, unused) and what is outside V8's heap (native).
      const freePerStream = (after.heapTotal - after.heapUsed - (before.heapTotal - before.heapUsed)) / (opened - 1);
      const nativePerStream = (after.rss - after.heapTotal - (before.rss - before.heapTotal)) / (opened - 1);
      const cpuPct = (
        ((idle.cpu.user + idle.cpu.system - (before.cpu.user + before.cpu.system)) /
          1e6 /
          ((performance.now() - t0) / 1000)) *
        100
      ).toFixed(0);
      // The peer, once our streams are closed: a bare node:http SSE server holding as many, idle as long.
      holder.dropAll();
      const peer = await bareSsePeer(opened, size === "quick" ? 500 : IDLE_MS).catch((err: Error) => err);
      return {
        baseline: "—",
        measured: `${opened} open; ${fmtBytes(perStream)} RSS (${fmtBytes(heapPerStream)} heap) per stream; lag p99 ${idle.lagP99Ms.toFixed(1)} ms (max ${idle.lagMaxMs.toFixed(0)} ms)`,
        ratio: "—",
        met: opened >= 10_000 && perStream <= 50_000 && idle.lagP99Ms <= 20,
        notes: `${opened < target ? `Only ${opened} of ${target} streams opened within the ${openBudgetMs / 1000} s budget. ` : ""}${opened - 1} followers (GET /v1/sessions/{id}/events) of one session whose run never ends, plus that run's own POST …/messages stream, opened with ${batch} in flight in ${openSeconds.toFixed(1)} s from the bench process (one HTTP/1.1 connection each; ${holder.retries} opens retried after a 503). RSS ${fmtBytes(before.rss)} → ${fmtBytes(after.rss)} (each read after a compacting GC, host/compact-gc.ts, in ours and the peer alike; this one at the end of a ${size === "quick" ? 0.5 : IDLE_MS / 1000} s idle window, over which the lag is measured; after the window's plain GC instead, what the figure judged until 2026-11-28, ${fmtBytes(perStreamIdle)} per stream${peer instanceof Error ? "" : `, the peer ${fmtBytes(peer.perStreamIdle)}, ${(perStreamIdle / peer.perStreamIdle).toFixed(2)}×`}: that reading also holds whatever part of the opens' sparse old space V8's memory reducer had not evacuated yet, 20 B to 3 KiB a stream run to run; ${size === "quick" ? "" : `${IDLE_EARLY_MS / 1000} s into it, before V8's memory reducer compacted the opens' garbage, RSS was ${fmtBytes(((early ?? idle).rss - before.rss) / (opened - 1))} per stream; `}the peer idles as long). Of the RSS per stream, ${fmtBytes(freePerStream)} is V8's free heap space and ${fmtBytes(nativePerStream)} outside V8's heap${peer instanceof Error ? "" : ` (the peer: ${fmtBytes(peer.freePerStream)} and ${fmtBytes(peer.nativePerStream)})`}. The agents process used ${cpuPct} % of a core from the first open to the end of the idle window.${size === "quick" ? " (quick: 50 streams only)" : ""}`,
        raw: {
          opened,
          perStream,
          perStreamIdle,
          heapPerStream,
          freePerStream,
          nativePerStream,
          lagP99Ms: idle.lagP99Ms,
          rssBefore: before.rss,
          rssAfter: after.rss,
          bareSse: peer instanceof Error ? peer.message : peer,
        },
        peers: [
          {
            peer: "bare Node SSE server (node:http, text/event-stream, `: ping` every 15 s), its own process",
            theirs:
              peer instanceof Error
                ? `not measured: ${peer.message}`
                : `${peer.held} open; ${fmtBytes(peer.perStream)} RSS (${fmtBytes(peer.heapPerStream)} heap) per stream; lag p99 ${peer.lagP99Ms.toFixed(1)} ms`,
            ours: `${opened} open; ${fmtBytes(perStream)} RSS (${fmtBytes(heapPerStream)} heap) per stream`,
            ratio: peer instanceof Error ? "—" : `${(perStream / peer.perStream).toFixed(2)}× its memory per stream`,
            goal: "≤ 1.5× its memory per stream",
            met: peer instanceof Error ? undefined : perStream <= 1.5 * peer.perStream,
          },
        ],
      };
    } catch (err) {
      error = String(err);
      throw new Error(`after ${opened} streams: ${error}`);
    } finally {
      await holder.closeAndCancel(sessionId);
    }
  },
};
