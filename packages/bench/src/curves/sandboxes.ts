import { loadavg } from "node:os";
import { bwrapRun } from "../baselines.ts";
import { type ComputeClient, computeClient, createSandbox, readySandbox, timedExec } from "../compute-client.ts";
import { curveRow, fmtCount, flatCurve } from "../curve.ts";
import type { Figure, Size } from "../figure.ts";
import { repeat } from "../loop.ts";
import type { ServiceProcess } from "../host/service-process.ts";
import { fmtBytes, lat, now, type Summary, summarize } from "../stats.ts";

const BATCH = 20;
/** Interleaved with every sample: a bare bwrap of the same command, what the machine's load alone does at that moment. */
const CONTROL = "bare bwrap p50 (interleaved)";
/** Time allowed for creating the population (all sizes together); the sizes reached are reported. */
const GROW_BUDGET_S = 240;

/** Progress of a long curve on stderr, as the runner logs (its stdout is the results table). */
export const progress = (id: string, line: string) => console.error(`bench: ${id}: ${line}`);

/**
 * Creates sandboxes `BATCH` at a time until `live` holds `target`, each made
 * READY by one exec; false when `deadline` (performance.now()) passed first.
 */
async function grow(client: ComputeClient, live: string[], target: number, deadline: number): Promise<boolean> {
  while (live.length < target) {
    if (performance.now() > deadline) return false;
    const made = await Promise.all(
      Array.from({ length: Math.min(BATCH, target - live.length) }, () => createSandbox(client)),
    );
    live.push(...made);
    await Promise.all(made.map((id) => timedExec(client, id, "/bin/true", [])));
  }
  return true;
}

async function destroyAll(client: ComputeClient, ids: string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += BATCH) {
    await Promise.all(ids.slice(i, i + BATCH).map((id) => client.destroySandbox({ sandboxId: id }).catch(() => {})));
  }
}

/** What the compute process and the machine looked like at one size. */
async function context(compute: ServiceProcess): Promise<string> {
  const s = await compute.stats();
  return `compute RSS ${fmtBytes(s.rss)}, load ${loadavg()[0]!.toFixed(1)}`;
}

/** One size of a sandbox curve: its samples and the interleaved bare-bwrap control. */
type SizeResult = { n: number; s: Summary; c: Summary; ctx: string };

/** Summarizes one size, with the machine's state at it, and prints it. */
async function sizeResult(
  id: string,
  n: number,
  samples: number[],
  control: number[],
  compute: ServiceProcess,
  grownS: number,
): Promise<SizeResult> {
  const r = {
    n,
    s: summarize(samples),
    c: summarize(control),
    ctx: `${await context(compute)}, ${grownS.toFixed(0)} s to grow to it`,
  };
  progress(id, `${n} live: ${lat(r.s)}, bare ${lat(r.c)}, ${r.ctx}`);
  return r;
}

/** The series and columns of a sandbox curve: p50 and p99 beside the control's p50, judged on p50. */
function againstControl(results: SizeResult[]) {
  return {
    series: [
      { name: "p50", points: results.map((r) => ({ x: r.n, y: r.s.p50 })) },
      { name: "p99", points: results.map((r) => ({ x: r.n, y: r.s.p99 })) },
      { name: CONTROL, points: results.map((r) => ({ x: r.n, y: r.c.p50 })) },
    ],
    columns: [
      { name: "p50 ÷ bare p50", values: results.map((r) => (r.s.p50 / r.c.p50).toFixed(2)) },
      { name: "samples", values: results.map((r) => String(r.s.n)) },
      { name: "at that size", values: results.map((r) => r.ctx) },
    ],
    judged: "p50" as const,
  };
}

export const LIVE_SIZES: Record<Size, number[]> = { quick: [1, 3], full: [1, 10, 100, 500] };
export const BACKGROUND_SIZES: Record<Size, number[]> = { quick: [0, 3], full: [0, 100, 500] };

/**
 * ExecCommand `/bin/true` round trip on one READY sandbox while 1, 10, 100,
 * 500 sandboxes are live (itself included): does an exec's cost grow with
 * what else the compute service and its driver hold?
 */
export const execVsLiveSandboxes: Figure = {
  id: "curve-exec-live",
  title: "curve: exec round trip vs live sandboxes",
  goal: "p50 at 500 live ≤ 2× p50 at 1",
  fullTimeoutMs: 600_000,
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const sizes = LIVE_SIZES[size];
    const live: string[] = [];
    const results: SizeResult[] = [];
    const deadline = performance.now() + (size === "quick" ? 20 : GROW_BUDGET_S) * 1000;
    let stopped: string | undefined;
    try {
      // The one every exec runs on: the first, live at every size.
      live.push(await readySandbox(client));
      for (const n of sizes) {
        const g0 = performance.now();
        if (!(await grow(client, live, n, deadline)))
          stopped = `stopped growing at ${live.length} live (of ${n}): the ${GROW_BUDGET_S} s budget for creating sandboxes ran out`;
        const grownS = (performance.now() - g0) / 1000;
        await new Promise((r) => setTimeout(r, size === "quick" ? 100 : 1000));
        for (let i = 0; i < 5; i++) await timedExec(client, live[0]!, "/bin/true", []);
        const samples: number[] = [];
        const control: number[] = [];
        await repeat(
          { n: size === "quick" ? 5 : 300, budgetMs: size === "quick" ? 3_000 : 15_000, minN: 5 },
          async () => {
            control.push((await bwrapRun("/bin/true", [])).totalNs);
            samples.push((await timedExec(client, live[0]!, "/bin/true", [])).totalNs);
          },
        );
        results.push(await sizeResult("curve-exec-live", live.length, samples, control, compute, grownS));
        if (stopped) break;
      }
    } finally {
      await destroyAll(client, live);
    }
    const curve = flatCurve({
      id: "exec-vs-live-sandboxes",
      title: "exec round trip vs live sandboxes",
      x: { label: "live sandboxes", scale: "log" },
      y: { label: "exec /bin/true to completed", unit: "ms" },
      ...againstControl(results),
      notes: `ExecCommand \`/bin/true\` to its completed event on the same READY sandbox (the first created) at every size; the others were created ${BATCH} at a time, each made READY by one exec, and sit idle.${stopped ? ` ${stopped}.` : ""}`,
    });
    return curveRow(curve, "p50", { raw: { points: results.map((r) => ({ live: r.n, ...r.s, control: r.c })) } });
  },
};

/**
 * CreateSandbox then `echo hi` to the first stdout byte with 0, 100, 500
 * other sandboxes already live; each measured sandbox is destroyed after
 * its sample, as in the sandbox-create figure.
 */
export const createVsLiveSandboxes: Figure = {
  id: "curve-create-live",
  title: "curve: create → first byte vs sandboxes already live",
  goal: "p50 with 500 live ≤ 2× p50 with 0",
  fullTimeoutMs: 600_000,
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const sizes = BACKGROUND_SIZES[size];
    const live: string[] = [];
    const results: SizeResult[] = [];
    const deadline = performance.now() + (size === "quick" ? 20 : GROW_BUDGET_S) * 1000;
    let stopped: string | undefined;
    try {
      for (const n of sizes) {
        const g0 = performance.now();
        if (!(await grow(client, live, n, deadline)))
          stopped = `stopped growing at ${live.length} live (of ${n}): the ${GROW_BUDGET_S} s budget for creating sandboxes ran out`;
        const grownS = (performance.now() - g0) / 1000;
        // Let the driver refill its warm pool after the burst of creates.
        await new Promise((r) => setTimeout(r, size === "quick" ? 200 : 3000));
        const warm = await createSandbox(client);
        await timedExec(client, warm, "/bin/true", []).finally(() => client.destroySandbox({ sandboxId: warm }));
        const samples: number[] = [];
        const control: number[] = [];
        await repeat(
          { n: size === "quick" ? 3 : 150, budgetMs: size === "quick" ? 3_000 : 20_000, minN: 3 },
          async () => {
            control.push((await bwrapRun("/bin/echo", ["hi"])).firstByteNs);
            const t0 = now();
            const id = await createSandbox(client);
            try {
              samples.push((await timedExec(client, id, "/bin/echo", ["hi"], t0)).firstByteNs);
            } finally {
              // Not timed: the population stays at n.
              await client.destroySandbox({ sandboxId: id });
            }
          },
        );
        results.push(await sizeResult("curve-create-live", live.length, samples, control, compute, grownS));
        if (stopped) break;
      }
    } finally {
      await destroyAll(client, live);
    }
    const curve = flatCurve({
      id: "create-vs-live-sandboxes",
      title: "create → first byte vs sandboxes already live",
      x: { label: "sandboxes already live", scale: "linear" },
      y: { label: "CreateSandbox + echo hi to first byte", unit: "ms" },
      ...againstControl(results),
      notes: `CreateSandbox then ExecCommand \`echo hi\` to the first stdout byte, each sandbox destroyed after its sample, with ${sizes.map(fmtCount).join(", ")} other READY sandboxes idle (created ${BATCH} at a time).${stopped ? ` ${stopped}.` : ""}`,
    });
    return curveRow(curve, "p50", { raw: { points: results.map((r) => ({ live: r.n, ...r.s, control: r.c })) } });
  },
};
