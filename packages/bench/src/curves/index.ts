import type { Figure } from "../figure.ts";
import { createVsLiveSandboxes, execVsLiveSandboxes } from "./sandboxes.ts";
import { sessionLogCurve } from "./session-log.ts";
import { sseMemoryCurve } from "./sse-memory.ts";
import { agentsListVsRows, loginVsRows } from "./table-rows.ts";

/**
 * Cost as the work grows: figures whose result carries a curve (src/curve.ts),
 * run after the figures of the table. `--only=<id>` runs one.
 */
export const curveFigures: Figure[] = [
  execVsLiveSandboxes,
  createVsLiveSandboxes,
  sseMemoryCurve,
  agentsListVsRows,
  loginVsRows,
  sessionLogCurve,
];
