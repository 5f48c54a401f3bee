import { bwrapRun } from "../baselines.ts";
import { computeClient, createSandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { repeat, ratio } from "../loop.ts";
import { lat, now, summarize } from "../stats.ts";

/** CreateSandbox then ExecCommand `echo hi` from a gRPC client, to the first stdout byte, against a bare bwrap `echo hi`. */
export const sandboxCreate: Figure = {
  id: "sandbox-create",
  title: "sandbox create → first stdout byte at a gRPC client (local driver)",
  goal: "p50 ≤ 20 ms, p99 ≤ 50 ms",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const created: string[] = [];
    const platform: number[] = [];
    const bare: number[] = [];
    // Warm-up: connection, JIT, first cgroup.
    const warm = await createSandbox(client);
    await timedExec(client, warm, "/bin/true", []).finally(() => client.destroySandbox({ sandboxId: warm }));
    const n = await repeat(
      { n: size === "quick" ? 3 : 200, budgetMs: size === "quick" ? 5_000 : 30_000, minN: 3 },
      async () => {
        bare.push((await bwrapRun("/bin/echo", ["hi"])).firstByteNs);
        const t0 = now();
        const id = await createSandbox(client);
        created.push(id);
        platform.push((await timedExec(client, id, "/bin/echo", ["hi"], t0)).firstByteNs);
        // Destroyed at once so live sandboxes do not pile up (not timed).
        await client.destroySandbox({ sandboxId: id });
      },
    );
    const m = summarize(platform);
    const b = summarize(bare);
    return {
      baseline: `bare bwrap \`echo hi\`: ${lat(b)}`,
      measured: lat(m),
      ratio: `p50 ${ratio(m.p50, b.p50)}`,
      met: m.p50 <= 20 && m.p99 <= 50,
      notes: `${n} create+exec pairs interleaved with bare bwrap spawns; each sandbox destroyed after its sample.`,
      raw: { platform: m, baseline: b },
    };
  },
};
