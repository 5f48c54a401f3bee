import { bwrapRun } from "../baselines.ts";
import { computeClient, readySandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { repeat, ratio } from "../loop.ts";
import { lat, summarize } from "../stats.ts";

/** ExecCommand `/bin/true` to its completed event on a READY sandbox, against a bare bwrap `/bin/true`. */
export const execRoundTrip: Figure = {
  id: "exec-round-trip",
  title: "exec round trip on a ready sandbox",
  goal: "p50 ≤ 5 ms",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const id = await readySandbox(client);
    try {
      for (let i = 0; i < 5; i++) await timedExec(client, id, "/bin/true", []);
      const platform: number[] = [];
      const bare: number[] = [];
      const n = await repeat(
        { n: size === "quick" ? 5 : 500, budgetMs: size === "quick" ? 5_000 : 20_000, minN: 5 },
        async () => {
          bare.push((await bwrapRun("/bin/true", [])).totalNs);
          platform.push((await timedExec(client, id, "/bin/true", [])).totalNs);
        },
      );
      const m = summarize(platform);
      const b = summarize(bare);
      return {
        baseline: `bare bwrap \`/bin/true\` to exit: ${lat(b)}`,
        measured: lat(m),
        ratio: `p50 ${ratio(m.p50, b.p50)}`,
        met: m.p50 <= 5,
        notes: `${n} execs of /bin/true to the completed event, interleaved with bare bwrap spawns.`,
        raw: { platform: m, baseline: b },
      };
    } finally {
      await client.destroySandbox({ sandboxId: id }).catch(() => {});
    }
  },
};
