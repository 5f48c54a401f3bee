// `pnpm bench`: see packages/bench (the figures, the runner, BENCHMARKS.md).
import "../packages/bench/src/main.ts";
