import { spawnTimed } from "../baselines.ts";
import { computeClient, readySandbox, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { processCpuMs } from "../host/proc-cpu.ts";
import { pct, repeat } from "../loop.ts";
import { fmtBytes, fmtRate } from "../stats.ts";

/**
 * `head -c N /dev/zero` streamed through ExecCommand, against the same
 * command read from a raw pipe (the goal's baseline) and through the floor:
 * a bare node:http2 server with compute's TLS relaying the command's pipe as
 * ExecEvents to the same client (peers/bare-exec.ts), which says what Node's
 * HTTP/2 over TLS allows any server here.
 */
export const execThroughput: Figure = {
  id: "exec-throughput",
  title: "exec stdout streaming throughput",
  goal: "≥ 50 % of the pipe",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const bytes = size === "quick" ? 4 << 20 : 128 << 20;
    const args = ["-c", String(bytes), "/dev/zero"];
    const id = await readySandbox(client);
    const floor = await stack.bareExec();
    const floorClient = computeClient(floor.urls.grpc!, await stack.tls("agents"));
    try {
      let pipeNs = 0;
      let execNs = 0;
      let floorNs = 0;
      let rounds = 0;
      // Where the exec's time goes: the service's and this client's CPU during the exec rounds only.
      let computeCpuMs = 0;
      let clientCpuUs = 0;
      await repeat({ n: size === "quick" ? 1 : 5, budgetMs: size === "quick" ? 5_000 : 40_000 }, async () => {
        const p = await spawnTimed("/usr/bin/head", args);
        const c0 = processCpuMs(compute.pid);
        const u0 = process.cpuUsage();
        const e = await timedExec(client, id, "/usr/bin/head", args);
        const u = process.cpuUsage(u0);
        clientCpuUs += u.user + u.system;
        computeCpuMs += processCpuMs(compute.pid) - c0;
        const f = await timedExec(floorClient, "-", "/usr/bin/head", args);
        if (p.bytes !== bytes || e.bytes !== bytes || f.bytes !== bytes)
          throw new Error(`short read: pipe ${p.bytes}, exec ${e.bytes}, floor ${f.bytes} of ${bytes}`);
        pipeNs += p.totalNs;
        execNs += e.totalNs;
        floorNs += f.totalNs;
        rounds++;
      });
      const pipeRate = (bytes * rounds) / (pipeNs / 1e9);
      const execRate = (bytes * rounds) / (execNs / 1e9);
      const floorRate = (bytes * rounds) / (floorNs / 1e9);
      const mib = (bytes * rounds) / 2 ** 20;
      const computeMsPerMiB = computeCpuMs / mib;
      const clientMsPerMiB = clientCpuUs / 1000 / mib;
      return {
        baseline: `raw pipe: ${fmtRate(pipeRate / 2 ** 20, "MiB/s")}`,
        measured: fmtRate(execRate / 2 ** 20, "MiB/s"),
        ratio: pct(execRate, pipeRate),
        met: execRate >= 0.5 * pipeRate,
        notes: `${rounds} rounds of ${fmtBytes(bytes)} (\`head -c\` of /dev/zero), pipe, exec and floor alternated; rate = bytes / time to exit. CPU per MiB streamed: compute ${computeMsPerMiB.toFixed(2)} ms, client ${clientMsPerMiB.toFixed(2)} ms. The floor (a bare node:http2 server with compute's TLS relaying the same command's pipe, unsandboxed, as ExecEvents to the same client): ${fmtRate(floorRate / 2 ** 20, "MiB/s")}, ${pct(floorRate, pipeRate)} of the pipe; ours is ${pct(execRate, floorRate)} of the floor.`,
        raw: {
          pipeBytesPerSecond: pipeRate,
          execBytesPerSecond: execRate,
          floorBytesPerSecond: floorRate,
          computeMsPerMiB,
          clientMsPerMiB,
        },
      };
    } finally {
      await client.destroySandbox({ sandboxId: id }).catch(() => {});
      await floor.stop();
    }
  },
};
