import { bwrapRun } from "../baselines.ts";
import { computeClient, readySandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { repeat, ratio } from "../loop.ts";
import { SANDBOX_RUNTIME, SandboxRuntimePeer } from "../peers/sandbox-runtime.ts";
import { lat, summarize } from "../stats.ts";

/** ExecCommand `/bin/true` to its completed event on a READY sandbox, against a bare bwrap `/bin/true`. */
export const execRoundTrip: Figure = {
  id: "exec-round-trip",
  title: "exec round trip on a ready sandbox",
  goal: "p50 ≤ 4 ms",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const id = await readySandbox(client);
    // The floors: a bare node:http2 server with compute's TLS (peers/bare-exec.ts) answering the same
    // client's ExecCommand with the completed event at once (the transport), and spawning /bin/true unsandboxed.
    const floor = await stack.bareExec();
    const floorClient = computeClient(floor.urls.grpc!, await stack.tls("agents"));
    try {
      for (let i = 0; i < 5; i++) await timedExec(floorClient, "-", "", []);
      for (let i = 0; i < 5; i++) await timedExec(client, id, "/bin/true", []);
      const platform: number[] = [];
      const bare: number[] = [];
      const transport: number[] = [];
      const spawned: number[] = [];
      // The peer: sandbox-runtime's wrap-and-run of `echo hi` to exit, every 5th sample (it takes ~20× ours).
      const srt: number[] = [];
      const peer = await SandboxRuntimePeer.start(stack.tmp).catch((err: Error) => err);
      if (!(peer instanceof Error)) await peer.run("echo hi", "hi\n");
      const n = await repeat(
        { n: size === "quick" ? 5 : 500, budgetMs: size === "quick" ? 5_000 : 40_000, minN: 5 },
        async (i) => {
          bare.push((await bwrapRun("/bin/true", [])).totalNs);
          if (!(peer instanceof Error) && i % 5 === 0) srt.push((await peer.run("echo hi", "hi\n")).totalNs);
          platform.push((await timedExec(client, id, "/bin/true", [])).totalNs);
          transport.push((await timedExec(floorClient, "-", "", [])).totalNs);
          if (i % 2 === 0) spawned.push((await timedExec(floorClient, "-", "/bin/true", [])).totalNs);
        },
      ).finally(() => (peer instanceof Error ? undefined : peer.close()));
      const m = summarize(platform);
      const b = summarize(bare);
      const p = summarize(srt);
      const t = summarize(transport);
      const sp = summarize(spawned);
      return {
        baseline: `bare bwrap \`/bin/true\` to exit: ${lat(b)}`,
        measured: lat(m),
        ratio: `p50 ${ratio(m.p50, b.p50)}`,
        met: m.p50 <= 4,
        notes: `${n} execs of /bin/true to the completed event, interleaved with bare bwrap spawns, (every 5th) sandbox-runtime's wrap-and-run of \`echo hi\` to its exit, and the floors: a bare node:http2 server with compute's TLS answering the same client's ExecCommand with the completed event at once (the transport alone): ${lat(t)}; the same server spawning /bin/true unsandboxed (every 2nd): ${lat(sp)}. Ours minus the transport floor at p50: ${(m.p50 - t.p50).toFixed(2)} ms.`,
        raw: { platform: m, baseline: b, sandboxRuntime: p, transportFloor: t, spawnFloor: sp },
        peers: [
          {
            peer: `${SANDBOX_RUNTIME}: wrap-and-run of \`echo hi\` to exit`,
            theirs: peer instanceof Error ? `not measured: ${peer.message}` : lat(p),
            ours: lat(m),
            ratio: `p50 ${ratio(m.p50, p.p50)}, p99 ${ratio(m.p99, p.p99)} of its time`,
            goal: "ours faster at p50 and p99",
            met: peer instanceof Error ? undefined : m.p50 < p.p50 && m.p99 < p.p99,
          },
        ],
      };
    } finally {
      await client.destroySandbox({ sandboxId: id }).catch(() => {});
      await floor.stop();
    }
  },
};
