import { probeCgroupMigration } from "../cgroup-migration.ts";
import { computeClient, createSandbox, readySandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { ratio, repeat } from "../loop.ts";
import { fmtBytes, lat, now, summarize } from "../stats.ts";

type CgroupMemory = { usageBytes: number; rssBytes: number; path: string } | undefined;

/**
 * Issue 18's two numbers for paused sandboxes on the local driver:
 * - resume to first byte: ExecCommand `echo hi` on a PAUSED sandbox (the
 *   domain resumes it transparently) to its first stdout byte, against the
 *   same exec on the same sandbox while READY, interleaved;
 * - memory held by N paused sandboxes: the kernel's count for the driver's
 *   cgroup subtree plus compute's RSS growth, measured while the N are READY
 *   and idle and again once they are PAUSED.
 */
export const pauseResume: Figure = {
  id: "pause-resume",
  title: "paused sandboxes: resume to first byte, memory held",
  goal: "resume → first byte p50 ≤ 30 ms; 1,000 paused sandboxes < 100 MiB",
  fullTimeoutMs: 600_000,
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const ids: string[] = [];
    const batch = 20;
    try {
      // --- resume to first byte, against an exec on the running sandbox ---
      // Sandboxes other figures left running (an agents session's, say) stay as they are while this one runs.
      const others = await compute.request<number>("running");
      const id = await readySandbox(client);
      ids.push(id);
      for (let i = 0; i < 3; i++) await timedExec(client, id, "/bin/echo", ["hi"]);
      const running: number[] = [];
      const resumed: number[] = [];
      const explicit: number[] = [];
      const restarted: number[] = [];
      // A paused sandbox is released (its processes ended) after COMPUTE_PAUSE_RELEASE_SECONDS, 1 s in the bench.
      const released = async () => {
        const end = performance.now() + 30_000;
        while ((await compute.request<number>("running")) > others) {
          if (performance.now() > end) throw new Error("a paused sandbox was not released within 30 s");
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      const n = await repeat(
        { n: size === "quick" ? 2 : 100, budgetMs: size === "quick" ? 5_000 : 60_000, minN: 2 },
        async () => {
          running.push((await timedExec(client, id, "/bin/echo", ["hi"])).firstByteNs);
          await client.pauseSandbox({ sandboxId: id });
          resumed.push((await timedExec(client, id, "/bin/echo", ["hi"])).firstByteNs);
          await client.pauseSandbox({ sandboxId: id });
          const t0 = now();
          await client.resumeSandbox({ sandboxId: id });
          explicit.push((await timedExec(client, id, "/bin/echo", ["hi"], t0)).firstByteNs);
          if (restarted.length < (size === "quick" ? 1 : 20)) {
            await client.pauseSandbox({ sandboxId: id });
            await released();
            restarted.push((await timedExec(client, id, "/bin/echo", ["hi"])).firstByteNs);
          }
        },
      );
      const rel = summarize(restarted);
      // A released resume moves a new process into the sandbox's cgroup: what that costs on this kernel now.
      const migration = await probeCgroupMigration();
      const migrationNote = migration
        ? ` A cgroup.procs write after a quiet spell takes ${migration.ms.toFixed(2)} ms on this machine now: ${migration.mode === "grace-period" ? "it waits an RCU grace period (the kernel's global migration lock)" : "no RCU grace period (the kernel's per-threadgroup migration lock: on Linux 6.18 a favordynmods mount since boot switches to it until a reboot, so the released number is lower here than on a freshly booted machine)"}.`
        : "";
      // Gone before the memory part, which waits until no sandbox of the bench runs.
      await client.destroySandbox({ sandboxId: id });
      ids.pop();
      const base = summarize(running);
      const res = summarize(resumed);
      const exp = summarize(explicit);

      // --- memory of N paused sandboxes ---
      const target = size === "quick" ? 2 : 1000;
      const budgetMs = size === "quick" ? 20_000 : 240_000;
      await compute.request("gc");
      const before = await compute.stats();
      const cgBefore = await compute.request<CgroupMemory>("cgroup");
      const mem: string[] = [];
      const t0 = performance.now();
      while (mem.length < target && performance.now() - t0 < budgetMs) {
        const made = await Promise.all(
          Array.from({ length: Math.min(batch, target - mem.length) }, () => createSandbox(client)),
        );
        ids.push(...made);
        mem.push(...made);
        await Promise.all(made.map((s) => timedExec(client, s, "/bin/true", [])));
      }
      const createSeconds = (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, 1000));
      await compute.request("gc");
      const idleStats = await compute.stats();
      const idleCg = await compute.request<CgroupMemory>("cgroup");
      const t1 = performance.now();
      for (let i = 0; i < mem.length; i += batch)
        await Promise.all(mem.slice(i, i + batch).map((s) => client.pauseSandbox({ sandboxId: s })));
      const pauseSeconds = (performance.now() - t1) / 1000;
      await released();
      // The kernel frees what the ended processes held a little after they are gone.
      await new Promise((r) => setTimeout(r, 3000));
      await compute.request("gc");
      const pausedStats = await compute.stats();
      const pausedCg = await compute.request<CgroupMemory>("cgroup");
      const delta = (cg: CgroupMemory) => (cg ? cg.usageBytes - (cgBefore?.usageBytes ?? 0) : Number.NaN);
      const anon = (cg: CgroupMemory) => (cg ? cg.rssBytes - (cgBefore?.rssBytes ?? 0) : Number.NaN);
      const idleTotal = delta(idleCg) + Math.max(0, idleStats.rss - before.rss);
      const pausedTotal = delta(pausedCg) + Math.max(0, pausedStats.rss - before.rss);
      const per1000 = (pausedTotal / mem.length) * 1000;
      const latencyMet = res.p50 <= 30 && rel.p50 <= 30;
      const memoryMet = per1000 < 100 * 2 ** 20;
      return {
        baseline: `exec \`echo hi\` on the READY sandbox → first byte: ${lat(base)}; ${mem.length} READY idle: ${fmtBytes(idleTotal)}`,
        measured: `on the PAUSED one (resumed by the exec): frozen ${lat(res)}, released ${lat(rel)}; ${mem.length} PAUSED: ${fmtBytes(pausedTotal)} (${fmtBytes(pausedTotal / mem.length)} each)`,
        ratio: `resume p50 frozen ${ratio(res.p50, base.p50)}, released ${ratio(rel.p50, base.p50)}; paused / idle memory ${(pausedTotal / idleTotal).toFixed(2)}×`,
        met: latencyMet && memoryMet && mem.length >= 1000,
        notes: `${n} rounds, interleaved: an exec on the READY sandbox, PauseSandbox, the timed exec (its first stdout byte, the resume included), PauseSandbox, then ResumeSandbox + exec timed from the ResumeSandbox call: ${lat(exp)}; and in the first rounds PauseSandbox, a wait until the sandbox is released (its processes ended after COMPUTE_PAUSE_RELEASE_SECONDS=1), then the timed exec (a new init on the same workspace): ${lat(rel)}. Memory: ${mem.length} sandboxes created ${batch} at a time and made READY in ${createSeconds.toFixed(1)} s${mem.length < target ? ` (stopped at the ${budgetMs / 1000} s budget)` : ""}, paused in ${pauseSeconds.toFixed(1)} s; the driver's cgroup subtree (memory.usage_in_bytes incl. page cache) idle ${fmtBytes(delta(idleCg))} (anon ${fmtBytes(anon(idleCg))}), paused ${fmtBytes(delta(pausedCg))} (anon ${fmtBytes(anon(pausedCg))}), + compute's RSS growth idle ${fmtBytes(idleStats.rss - before.rss)}, paused ${fmtBytes(pausedStats.rss - before.rss)}; ${fmtBytes(per1000)} per 1,000 paused. Latency goal ${latencyMet ? "met" : "missed"}, memory goal ${memoryMet ? "met" : "missed"}.${migrationNote}`,
        raw: {
          running: base,
          resumed: res,
          explicit: exp,
          released: rel,
          migration,
          sandboxes: mem.length,
          idleTotal,
          pausedTotal,
          idleCg,
          pausedCg,
          before,
          idleStats,
          pausedStats,
        },
      };
    } finally {
      for (let i = 0; i < ids.length; i += batch) {
        await Promise.all(ids.slice(i, i + batch).map((s) => client.destroySandbox({ sandboxId: s }).catch(() => {})));
      }
    }
  },
};
