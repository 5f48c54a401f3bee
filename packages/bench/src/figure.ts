import type { Curve } from "./curve.ts";
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
  /** How a cost grows with the work (src/curve.ts): printed as tables and drawn as charts. */
  curves?: Curve[];
  /** What users would pick instead, measured in the same run (BENCHMARKS.md's "Peers (same run)" table). */
  peers?: PeerResult[];
  /** CPU time the hypervisor took from the machine while the figure ran, ms (set by the runner). */
  stolenMs?: number;
}

/** One row of the peers table: ours against a peer on the same work, with its own goal. */
export interface PeerResult {
  /** The peer and what of it was measured, e.g. "grpc-js 1.14.7: VerifyToken throughput". */
  peer: string;
  theirs: string;
  ours: string;
  /** Ours relative to the peer, said which way (e.g. "1.12× its throughput"). */
  ratio: string;
  goal: string;
  /** undefined when the peer could not be measured (`theirs` says why). */
  met: boolean | undefined;
}

export interface Figure {
  id: string;
  title: string;
  goal: string;
  /** Its own ceiling for a full run, when the runner's default is too short for it (ms). */
  fullTimeoutMs?: number;
  /** The same for a quick run (a figure that starts processes of its own, e.g. peers). */
  quickTimeoutMs?: number;
  run(stack: Stack, size: Size): Promise<Omit<FigureResult, "figure" | "goal">>;
}
