export { runBench, type RunOptions } from "./runner.ts";
export { figures } from "./figures/index.ts";
export type { Figure, FigureResult, Size } from "./figure.ts";
export { percentile, summarize, type Summary } from "./stats.ts";
export { describeMachine, type Machine } from "./machine.ts";
