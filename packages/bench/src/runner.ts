import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { writeCharts } from "./chart.ts";
import { curvesSection, curveTable } from "./curve.ts";
import type { Figure, FigureResult, Size } from "./figure.ts";
import { figures } from "./figures/index.ts";
import { describeMachine, stolenCpuMs } from "./machine.ts";
import { markdown, peerTable, table } from "./report.ts";
import { Stack } from "./stack.ts";

export interface RunOptions {
  size: Size;
  /** Figure ids to run (all when empty). */
  only?: string[];
  /** Markdown file to write, if any. */
  out?: string;
  log?: (line: string) => void;
}

/** Hard ceiling per figure, so one hung service cannot stall the run. */
const FIGURE_TIMEOUT_MS = { quick: 40_000, full: 150_000 };

export async function runBench(options: RunOptions): Promise<FigureResult[]> {
  const log = options.log ?? ((l: string) => console.error(l));
  const machine = describeMachine();
  const selected = figures.filter((f) => !options.only?.length || options.only.includes(f.id));
  const stack = new Stack();
  const t0 = performance.now();
  const stolenAtStart = stolenCpuMs();
  const results: FigureResult[] = [];
  try {
    for (const figure of selected) {
      log(`bench: ${figure.id} ...`);
      const started = performance.now();
      const stolen = stolenCpuMs();
      const result = await runOne(figure, stack, options.size);
      result.stolenMs = stolenCpuMs() - stolen;
      await stack.figureDone();
      log(
        `bench: ${figure.id}: ${result.measured} (baseline ${result.baseline}; ${result.ratio}) ${((performance.now() - started) / 1000).toFixed(1)} s, ${(result.stolenMs / 1000).toFixed(1)} s stolen${result.met === undefined ? ` — ${result.notes}` : ""}`,
      );
      results.push(result);
    }
  } finally {
    await stack.close();
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(table(results));
  if (peerTable(results)) console.log(`\n${peerTable(results)}`);
  const curves = results.flatMap((r) => r.curves ?? []);
  for (const c of curves)
    console.log(
      `\n${c.title}: ${c.met === undefined ? "not measured" : c.met ? "met" : "missed"} (${c.verdict})\n${curveTable(c)}`,
    );
  if (options.out) {
    // The hand-written part (what bounds each miss, from profiles) lives beside the code and is carried into the file.
    const analysisFile = new URL("../ANALYSIS.md", import.meta.url);
    const preamble = existsSync(analysisFile) ? readFileSync(analysisFile, "utf8") : undefined;
    writeFileSync(
      options.out,
      markdown(results, machine, {
        size: options.size,
        seconds,
        stolenMs: stolenCpuMs() - stolenAtStart,
        database: stack.databaseKind,
        preamble,
        // Each curve's chart is an SVG beside the file (docs/bench/<id>.svg), linked from its section.
        curves: curvesSection(curves, await writeCharts(curves, dirname(options.out))),
      }),
    );
    log(`bench: wrote ${options.out}`);
  }
  return results;
}

async function runOne(figure: Figure, stack: Stack, size: Size): Promise<FigureResult> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const own = size === "full" ? figure.fullTimeoutMs : figure.quickTimeoutMs;
    const limitMs = own ?? FIGURE_TIMEOUT_MS[size];
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`did not finish within ${limitMs / 1000} s`)), limitMs);
    });
    const r = await Promise.race([figure.run(stack, size), timeout]);
    return { figure: figure.title, goal: figure.goal, ...r };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return {
      figure: figure.title,
      goal: figure.goal,
      baseline: "—",
      measured: "not measured",
      ratio: "—",
      met: undefined,
      notes: `not measured: ${message.split("\n")[0]}`,
    };
  } finally {
    clearTimeout(timer);
  }
}
