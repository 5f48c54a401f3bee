// `node --import tsx packages/bench/src/profile-summary.ts <file.cpuprofile> [top]`:
// self time by function and by package from a --cpu-prof profile, to see
// what bounds a figure (the bench passes BENCH_CHILD_EXEC_ARGV to the
// service processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof").
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

export function summarizeProfile(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (const [i, id] of profile.samples.entries()) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fn = new Map<string, number>();
  const pkg = new Map<string, number>();
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const short = url
      .replace(/^.*node_modules\/\.pnpm\/[^/]+\/node_modules\//, "")
      .replace(/^file:\/\/\/work\/main\//, "");
    fn.set(
      `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`,
      (fn.get(`${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`) ?? 0) + us,
    );
    const p =
      url === ""
        ? `(${functionName})`
        : url.startsWith("node:")
          ? "node:*"
          : (/node_modules\/\.pnpm\/[^/]+\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1] ??
            short.split("/").slice(0, 2).join("/"));
    pkg.set(p, (pkg.get(p) ?? 0) + us);
  }
  const fmt = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(
        ([k, us]) => `${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`,
      )
      .join("\n");
  // Inclusive time: each sample counts once for every distinct frame on its stack.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const incl = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const { functionName, url, lineNumber } = byId.get(cur)!.callFrame;
      if (!url) continue;
      const short = url
        .replace(/^.*node_modules\/\.pnpm\/[^/]+\/node_modules\//, "")
        .replace(/^file:\/\/\/work\/main\//, "");
      const key = `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      incl.set(key, (incl.get(key) ?? 0) + us);
    }
  }
  return `total ${(total / 1000).toFixed(0)} ms sampled\n\nby package:\n${fmt(pkg)}\n\nby function (self):\n${fmt(fn)}\n\nby function (inclusive):\n${fmt(incl)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) {
    console.error("usage: profile-summary.ts <file.cpuprofile> [top]");
    process.exit(2);
  }
  console.log(summarizeProfile(JSON.parse(readFileSync(file, "utf8")) as Profile, Number(process.argv[3] ?? 25)));
}
