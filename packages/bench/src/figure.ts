import type { Stack } from "./stack.ts";

export type Size = "quick" | "full";

/** One row of the table. `met` is undefined when the figure could not be measured. */
export interface FigureResult {
  figure: string;
  baseline: string;
  measured: string;
  ratio: string;
  goal: string;
  met: boolean | undefined;
  /** What the numbers mean, what was scaled down, what bounds a miss. */
  notes?: string;
  /** Raw numbers for the smoke test and the JSON dump. */
  raw?: Record<string, unknown>;
}

export interface Figure {
  id: string;
  title: string;
  goal: string;
  /** Its own ceiling for a full run, when the runner's default is too short for it (ms). */
  fullTimeoutMs?: number;
  run(stack: Stack, size: Size): Promise<Omit<FigureResult, "figure" | "goal">>;
}
