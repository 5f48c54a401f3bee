// `pnpm bench [--quick] [--only=id,id] [--out=FILE]`: runs the figures and
// prints the table; the full run writes BENCHMARKS.md at the repository root.
import { fileURLToPath } from "node:url";
import { figures } from "./figures/index.ts";
import { runBench } from "./runner.ts";

const args = process.argv.slice(2);
const USAGE = "usage: pnpm bench [--quick] [--only=id,id] [--out=FILE]";
// Anything else (a --help, a typo) must not start the full 16-minute run, which loads the whole machine.
const unknown = args.filter((a) => a !== "--quick" && !a.startsWith("--only=") && !a.startsWith("--out="));
if (unknown.length > 0) {
  const help = unknown.every((a) => a === "--help" || a === "-h");
  const lines = [
    ...(help ? [] : [`bench: unknown argument ${unknown.join(" ")}`]),
    USAGE,
    "figures (--only ids):",
    ...figures.map((f) => `  ${f.id.padEnd(28)} ${f.title}`),
  ];
  (help ? console.log : console.error)(lines.join("\n"));
  process.exit(help ? 0 : 2);
}
const quick = args.includes("--quick");
const only = args
  .find((a) => a.startsWith("--only="))
  ?.slice("--only=".length)
  .split(",")
  .filter(Boolean);
const unknownIds = only?.filter((id) => !figures.some((f) => f.id === id)) ?? [];
if (unknownIds.length > 0) {
  console.error(`bench: no figure ${unknownIds.join(", ")}; pnpm bench --help lists them`);
  process.exit(2);
}
const outArg = args.find((a) => a.startsWith("--out="))?.slice("--out=".length);
const defaultOut =
  quick || only?.length ? undefined : fileURLToPath(new URL("../../../BENCHMARKS.md", import.meta.url));

const results = await runBench({ size: quick ? "quick" : "full", only, out: outArg ?? defaultOut });
process.exitCode = results.length === 0 ? 1 : 0;
