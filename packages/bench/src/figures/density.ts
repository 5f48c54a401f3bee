import { bwrapRun } from "../baselines.ts";
import { computeClient, createSandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { fmtBytes, lat, summarize } from "../stats.ts";

type CgroupMemory = { usageBytes: number; rssBytes: number; path: string } | undefined;

/**
 * N idle READY sandboxes: their memory as the kernel counts it (the bench's
 * own cgroup subtree of the compute process's local driver) plus the compute
 * process's RSS growth; then 100 execs at once on 100 of them.
 */
export const density: Figure = {
  id: "density",
  title: "density",
  goal: "500 idle sandboxes in < 2 GiB; 100 concurrent execs p99 ≤ 150 ms",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const target = size === "quick" ? 5 : 500;
    const concurrent = size === "quick" ? 5 : 100;
    const ids: string[] = [];
    const batch = 20;
    const budgetMs = size === "quick" ? 15_000 : 70_000;
    try {
      await compute.request("gc");
      const before = await compute.stats();
      const cgBefore = await compute.request<CgroupMemory>("cgroup");
      const t0 = performance.now();
      while (ids.length < target && performance.now() - t0 < budgetMs) {
        const n = Math.min(batch, target - ids.length);
        const made = await Promise.all(Array.from({ length: n }, () => createSandbox(client)));
        ids.push(...made);
        // An exec waits for READY: afterwards every sandbox is up and idle.
        await Promise.all(made.map((id) => timedExec(client, id, "/bin/true", [])));
      }
      const createSeconds = (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, 1000));
      await compute.request("gc");
      const after = await compute.stats();
      const cg = await compute.request<CgroupMemory>("cgroup");
      const sandboxBytes = cg ? cg.usageBytes - (cgBefore?.usageBytes ?? 0) : Number.NaN;
      const serviceBytes = after.rss - before.rss;
      const total = sandboxBytes + Math.max(0, serviceBytes);
      const scaled = (total / ids.length) * 500;

      // 100 execs at once, on 100 different sandboxes, three rounds; bare bwrap at the same concurrency as context.
      const lanes = ids.slice(0, concurrent);
      const execs: number[] = [];
      const bare: number[] = [];
      // The floor: the same execs, same client and TLS, on a bare node:http2 server spawning them unsandboxed (peers/bare-exec.ts).
      const floor = await stack.bareExec();
      const floorClient = computeClient(floor.urls.grpc!, await stack.tls("agents"));
      const unsandboxed: number[] = [];
      for (let round = 0; round < (size === "quick" ? 1 : 3); round++) {
        const r = await Promise.all(lanes.map((id) => timedExec(client, id, "/bin/echo", ["hi"])));
        execs.push(...r.map((x) => x.totalNs));
        const b = await Promise.all(lanes.map(() => bwrapRun("/bin/echo", ["hi"])));
        bare.push(...b.map((x) => x.totalNs));
        const f = await Promise.all(lanes.map(() => timedExec(floorClient, "-", "/bin/echo", ["hi"])));
        unsandboxed.push(...f.map((x) => x.totalNs));
      }
      await floor.stop();
      const e = summarize(execs);
      const b = summarize(bare);
      const f = summarize(unsandboxed);
      const memMet = ids.length >= 500 && total < 2 * 2 ** 30;
      return {
        baseline: `${concurrent} bare bwrap \`echo hi\` at once: ${lat(b)}`,
        measured: `${ids.length} idle: ${fmtBytes(total)} (${fmtBytes(total / ids.length)} each); ${concurrent} concurrent execs: ${lat(e)}`,
        ratio: `exec p99 / bare p99 ${(e.p99 / b.p99).toFixed(2)}×; memory goal ${memMet ? "met" : "missed"}, exec goal ${e.p99 <= 150 ? "met" : "missed"}`,
        met: memMet && e.p99 <= 150,
        notes: `${ids.length} sandboxes created ${batch} at a time and made READY in ${createSeconds.toFixed(1)} s${ids.length < target ? ` (stopped at the ${budgetMs / 1000} s budget)` : ""}. Memory = the kernel's count for the driver's cgroup subtree (${fmtBytes(sandboxBytes)}, memory.usage_in_bytes incl. page cache; anon RSS ${cg ? fmtBytes(cg.rssBytes) : "n/a"}) + compute's RSS growth (${fmtBytes(serviceBytes)}); ${fmtBytes(scaled)} scaled to 500. Execs: \`/bin/echo hi\` to the completed event, ${concurrent} in flight at once on ${concurrent} different sandboxes, ${size === "quick" ? 1 : 3} rounds. The floor, ${concurrent} at once through the same client to a bare node:http2 server with compute's TLS spawning \`/bin/echo hi\` unsandboxed: ${lat(f)}; ours is ${(e.p99 / f.p99).toFixed(2)}× its p99.`,
        raw: { sandboxes: ids.length, sandboxBytes, serviceBytes, exec: e, bare: b, unsandboxed: f },
      };
    } finally {
      for (let i = 0; i < ids.length; i += batch) {
        await Promise.all(
          ids.slice(i, i + batch).map((id) => client.destroySandbox({ sandboxId: id }).catch(() => {})),
        );
      }
    }
  },
};
