// `pnpm bench [--quick] [--only=id,id] [--out=FILE]`: runs the figures and
// prints the table; the full run writes BENCHMARKS.md at the repository root.
import { fileURLToPath } from "node:url";
import { runBench } from "./runner.ts";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const only = args
  .find((a) => a.startsWith("--only="))
  ?.slice("--only=".length)
  .split(",")
  .filter(Boolean);
const outArg = args.find((a) => a.startsWith("--out="))?.slice("--out=".length);
const defaultOut =
  quick || only?.length ? undefined : fileURLToPath(new URL("../../../BENCHMARKS.md", import.meta.url));

const results = await runBench({ size: quick ? "quick" : "full", only, out: outArg ?? defaultOut });
process.exitCode = results.length === 0 ? 1 : 0;
