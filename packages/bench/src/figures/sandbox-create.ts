import { bwrapRun } from "../baselines.ts";
import { computeClient, createSandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { repeat, ratio } from "../loop.ts";
import { SANDBOX_RUNTIME, SandboxRuntimePeer } from "../peers/sandbox-runtime.ts";
import { lat, now, summarize } from "../stats.ts";

/** CreateSandbox then ExecCommand `echo hi` from a gRPC client, to the first stdout byte, against a bare bwrap `echo hi`. */
export const sandboxCreate: Figure = {
  id: "sandbox-create",
  title: "sandbox create → first stdout byte at a gRPC client (local driver)",
  goal: "p50 ≤ 15 ms, p99 ≤ 40 ms",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const created: string[] = [];
    const platform: number[] = [];
    const bare: number[] = [];
    // Warm-up: connection, JIT, first cgroup.
    const warm = await createSandbox(client);
    await timedExec(client, warm, "/bin/true", []).finally(() => client.destroySandbox({ sandboxId: warm }));
    // The peer: sandbox-runtime's wrap-and-run of `echo hi`, a new sandbox per command as srt makes one.
    const srt: number[] = [];
    const peer = await SandboxRuntimePeer.start(stack.tmp).catch((err: Error) => err);
    if (!(peer instanceof Error)) await peer.run("echo hi", "hi\n");
    const n = await repeat(
      // The budget has room for the peer's ~100-200 ms a sample beside ours.
      { n: size === "quick" ? 3 : 200, budgetMs: size === "quick" ? 5_000 : 75_000, minN: 3 },
      async () => {
        bare.push((await bwrapRun("/bin/echo", ["hi"])).firstByteNs);
        if (!(peer instanceof Error)) srt.push((await peer.run("echo hi", "hi\n")).firstByteNs);
        const t0 = now();
        const id = await createSandbox(client);
        created.push(id);
        platform.push((await timedExec(client, id, "/bin/echo", ["hi"], t0)).firstByteNs);
        // Destroyed at once so live sandboxes do not pile up (not timed).
        await client.destroySandbox({ sandboxId: id });
      },
    ).finally(() => (peer instanceof Error ? undefined : peer.close()));
    const m = summarize(platform);
    const b = summarize(bare);
    const p = summarize(srt);
    return {
      baseline: `bare bwrap \`echo hi\`: ${lat(b)}`,
      measured: lat(m),
      ratio: `p50 ${ratio(m.p50, b.p50)}`,
      met: m.p50 <= 15 && m.p99 <= 40,
      notes: `${n} create+exec pairs interleaved with bare bwrap spawns and with sandbox-runtime's wrap-and-run of \`echo hi\` (initialized once: its proxies; per sample its wrap, which scans its empty workspace with ripgrep, and the bwrap it spawns through the shell); each sandbox destroyed after its sample.`,
      raw: { platform: m, baseline: b, sandboxRuntime: p },
      peers: [
        {
          peer: `${SANDBOX_RUNTIME}: wrap-and-run of \`echo hi\` to its first stdout byte`,
          theirs: peer instanceof Error ? `not measured: ${peer.message}` : lat(p),
          ours: lat(m),
          ratio: `p50 ${ratio(m.p50, p.p50)}, p99 ${ratio(m.p99, p.p99)} of its time`,
          goal: "ours faster at p50 and p99",
          met: peer instanceof Error ? undefined : m.p50 < p.p50 && m.p99 < p.p99,
        },
      ],
    };
  },
};
