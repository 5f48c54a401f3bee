import { execFileSync } from "node:child_process";
import { curveRow, fmtCount, linearCurve, linearFit } from "../curve.ts";
import type { Figure, Size } from "../figure.ts";
import { SETTLE_MS, settle } from "../idle-settle.ts";
import { fmtBytes } from "../stats.ts";
import { progress } from "./sandboxes.ts";
import { SseHolder } from "../sse-holder.ts";

export const STREAM_SIZES: Record<Size, number[]> = { quick: [10, 30], full: [1000, 5000, 10_000, 20_000] };
/** The sse-streams figure's per-stream goal (50 kB), the constant this curve's slope is held to. */
const MAX_BYTES_PER_STREAM = 50_000;
const IN_FLIGHT = 25;
/** Descriptors each process keeps for everything but the streams (database pool, IPC, listeners, files). */
const FD_MARGIN = 512;

/**
 * Raises the open-files limit of a process (the bench's, the agents') to
 * `wanted` with prlimit(1): n streams are n sockets on each side. Returns the
 * soft limit in force afterwards (a container without CAP_SYS_RESOURCE cannot
 * go past its hard limit, 20,000 here) and what happened.
 */
function raiseNofile(pid: number, wanted: number): { limit: number; note?: string } {
  const read = () =>
    Number(
      execFileSync("prlimit", ["--pid", String(pid), "--nofile", "--noheadings", "--output=SOFT"], {
        encoding: "utf8",
      }).trim(),
    );
  const current = read();
  if (current >= wanted) return { limit: current };
  try {
    execFileSync("prlimit", ["--pid", String(pid), `--nofile=${wanted}:${wanted}`], { stdio: "pipe" });
    return { limit: read(), note: `open-files limit of pid ${pid} raised from ${current} to ${wanted}` };
  } catch (err) {
    const why = String((err as { stderr?: Buffer }).stderr ?? err)
      .trim()
      .split("\n")[0];
    return { limit: current, note: `the open-files limit (${current}) could not be raised (${why})` };
  }
}

/**
 * The agents process's RSS (after GC) while it holds 1k, 5k, 10k, 20k idle
 * SSE followers of one session whose run never ends (the `bench/idle`
 * model), each its own HTTP/1.1 connection from the bench process. Fitted
 * to RSS = a + b·n: b is the memory per idle stream.
 *
 * Each point (and the state before the first) is read after a compacting GC
 * (host/compact-gc.ts), at the end of the idle spell that the sse-streams figure
 * reads at. Read only after the spell's plain GC, as until 2026-11-27, a
 * point also held whatever part of its burst of opens' sparse old space
 * V8's memory reducer had not compacted: its GCs evacuate at most 12 MB of
 * live objects each, so a burst of 9,500 opens left more of it than one of
 * 4,000, and how much varied from run to run (V8's free heap 1.2-5.8 KiB a
 * stream; R² 0.9504 and 0.9979 for the same code). That reading is still
 * reported beside the judged one ("RSS after the idle spell").
 */
export const sseMemoryCurve: Figure = {
  id: "curve-sse-memory",
  title: "curve: agents memory vs idle SSE streams",
  goal: `RSS linear in streams (R² ≥ 0.99), ≤ ${MAX_BYTES_PER_STREAM / 1000} kB per stream`,
  fullTimeoutMs: 600_000,
  async run(stack, size) {
    const agents = await stack.agents();
    const wanted = STREAM_SIZES[size];
    const raised = [process.pid, agents.pid].map((pid) => raiseNofile(pid, wanted.at(-1)! + FD_MARGIN));
    // Sizes past what both processes may open are measured at the most they can (each keeps FD_MARGIN for the rest).
    const cap = Math.min(...raised.map((r) => r.limit)) - FD_MARGIN;
    const sizes = [...new Set(wanted.map((n) => Math.min(n, cap)))];
    const limits = [...new Set(raised.flatMap((r) => (r.note ? [r.note] : [])))];
    if (sizes.at(-1)! < wanted.at(-1)!)
      limits.push(`so the largest size is ${fmtCount(sizes.at(-1)!)} instead of ${fmtCount(wanted.at(-1)!)}`);
    const { access_token: token } = await stack.login();
    const sessionId = await stack.newSession(token, "bench/idle");
    const base = new URL(agents.urls.url!);
    const holder = new SseHolder(base, token);
    const points: Array<{
      n: number;
      rss: number;
      heap: number;
      /** RSS growth after the idle spell's plain GC, before the compacting one. */
      rssIdle: number;
      lagP99Ms: number;
      openSeconds: number;
    }> = [];
    let opened = 0;
    let stopped: string | undefined;
    try {
      // The run's own stream keeps the session's run open; it is not counted.
      await holder.openIdleRun(sessionId);
      await agents.request("gc", 60_000, { compact: true });
      const before = await agents.stats();
      // Opens and idle windows (4 × SETTLE_MS) together, within fullTimeoutMs.
      const budgetMs = size === "quick" ? 15_000 : 420_000;
      const t0 = performance.now();
      for (const n of sizes) {
        const started = performance.now();
        const from = opened;
        await holder.follow(
          sessionId,
          IN_FLIGHT,
          (started) => {
            if (from + started >= n) return false;
            if (performance.now() - t0 <= budgetMs) return true;
            // Measured at what was reached, and the curve ends there.
            stopped = `opening stopped at ${fmtCount(opened)} of ${fmtCount(n)} streams: the ${budgetMs / 1000} s budget ran out`;
            return false;
          },
          () => opened++,
        );
        const openSeconds = (performance.now() - started) / 1000;
        // Idle: nothing is sent; the process's own timers (pings) run. Read as the sse-streams figure reads
        // it: after V8's memory reducer compacted what the opens left (a 3 s idle spell and a GC left the
        // 19,488 point of the 16:52 run +665 MiB over the line, R² 0.913).
        await agents.request("resetLag");
        // Then (compacted) what the streams hold, whatever part of the opens' sparse old space the idle spell left.
        const { idle, after: settled, compacted: s } = await settle(agents, size === "quick" ? 200 : SETTLE_MS);
        // n = the followers (the run's own POST stream was open before the baseline).
        points.push({
          n: opened,
          rss: s.rss - before.rss,
          heap: s.heapUsed - before.heapUsed,
          rssIdle: settled.rss - before.rss,
          lagP99Ms: idle.lagP99Ms,
          openSeconds,
        });
        progress(
          "curve-sse-memory",
          `${opened} streams: RSS +${fmtBytes(s.rss - before.rss)} after a compacting GC (+${fmtBytes(settled.rss - before.rss)} after the idle spell's GC), opened in ${openSeconds.toFixed(0)} s`,
        );
        if (stopped) break;
      }
      // The JS heap alone, for the analysis: RSS also holds pages V8 and malloc keep after a GC.
      const heapFit = linearFit(points.map((p) => ({ x: p.n, y: p.heap })));
      const idleFit = linearFit(points.map((p) => ({ x: p.n, y: p.rssIdle })));
      const curve = linearCurve({
        id: "sse-memory-vs-streams",
        title: "agents memory vs idle SSE streams",
        x: { label: "idle SSE streams", scale: "linear" },
        y: { label: "agents process growth after a compacting GC", unit: "bytes" },
        series: [
          { name: "RSS", points: points.map((p) => ({ x: p.n, y: p.rss })) },
          { name: "heap used", points: points.map((p) => ({ x: p.n, y: p.heap })) },
        ],
        columns: [
          { name: "RSS after the idle spell", values: points.map((p) => fmtBytes(p.rssIdle)) },
          { name: "RSS per stream", values: points.map((p) => fmtBytes(p.rss / p.n)) },
          { name: "heap per stream", values: points.map((p) => fmtBytes(p.heap / p.n)) },
          { name: "lag p99 idle", values: points.map((p) => `${p.lagP99Ms.toFixed(1)} ms`) },
          { name: "opened in", values: points.map((p) => `${p.openSeconds.toFixed(1)} s`) },
        ],
        judged: "RSS",
        maxSlope: MAX_BYTES_PER_STREAM,
        slopeLabel: "per stream",
        notes: `Followers (GET /v1/sessions/{id}/events) of one session whose run never ends, opened ${IN_FLIGHT} in flight from the bench process, one HTTP/1.1 connection each, to ${sizes.map(fmtCount).join(", ")}; growth of the agents process over its state before the first (RSS ${fmtBytes(before.rss)}), read after a compacting GC (every fragmented page of V8's old space evacuated; bench harness only) at the end of a ${size === "quick" ? 0.2 : SETTLE_MS / 1000} s idle spell at each size. ${holder.retries} opens retried after a 503. Heap used alone fits ${fmtBytes(heapFit.intercept)} + ${fmtBytes(heapFit.slope)} × n (R² ${heapFit.r2.toFixed(4)}). Read after the idle spell's plain GC instead (what this curve judged until 2026-11-27: it also holds whatever part of the opens' sparse old space V8's memory reducer left, whose GCs evacuate at most 12 MB each), RSS fits ${fmtBytes(idleFit.intercept)} + ${fmtBytes(idleFit.slope)} × n (R² ${idleFit.r2.toFixed(4)}).${stopped ? ` ${stopped}.` : ""}${limits.length ? ` ${limits.join("; ")}.` : ""}`,
      });
      return curveRow(curve, "RSS", {
        raw: { points, rssBefore: before.rss, retries: holder.retries, fit: curve.fit, heapFit, idleFit },
        row: {
          measured: `${fmtBytes(curve.fit.slope)} RSS per stream after a compacting GC (fit over ${points.map((p) => fmtCount(p.n)).join(", ")}; R² ${curve.fit.r2.toFixed(4)}); heap ${fmtBytes(heapFit.slope)} per stream (R² ${heapFit.r2.toFixed(4)}); after the idle spell's plain GC ${fmtBytes(idleFit.slope)} per stream (R² ${idleFit.r2.toFixed(4)})`,
          baseline: "—",
          ratio: "—",
        },
      });
    } catch (err) {
      throw new Error(`after ${opened} streams: ${String(err)}`);
    } finally {
      await holder.closeAndCancel(sessionId);
    }
  },
};
