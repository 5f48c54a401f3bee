// test-timeout: 600000
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CHART_DIR } from "./chart.ts";
import { curveFigures } from "./curves/index.ts";
import { figures } from "./figures/index.ts";
import { loginThroughput } from "./figures/login-throughput.ts";
import { tokenLatency } from "./figures/token-latency.ts";
import { runBench } from "./runner.ts";

// Every figure at toy size: the harness starts the real services, measures
// and produces numbers. Speed is never asserted (the machine is shared).
test("pnpm bench --quick produces a number for every figure", { timeout: 570_000 }, async () => {
  // Written to a temporary file, so the report and the curves' charts are made too.
  const dir = mkdtempSync(join(tmpdir(), "bench-smoke-"));
  const results = await runBench({ size: "quick", log: () => {}, out: join(dir, "BENCHMARKS.md") });
  assert.equal(results.length, figures.length);
  for (const r of results) {
    assert.notEqual(r.met, undefined, `${r.figure} was not measured: ${r.notes}`);
    assert.match(r.measured, /\d/, `${r.figure} has no number`);
    assert.ok(r.raw, `${r.figure} has no raw numbers`);
    assert.equal(typeof r.stolenMs, "number", `${r.figure}: the hypervisor's share of its time not read`);
    for (const p of r.peers ?? [])
      assert.notEqual(p.met, undefined, `${r.figure}: peer ${p.peer} was not measured: ${p.theirs}`);
  }
  // The peers (sandbox-runtime ×2, grpc-js ×4, bare SSE server) came out beside their figures.
  assert.ok(results.flatMap((r) => r.peers ?? []).length >= 7, "a peer row for every peer measured");
  // Every curve: a table and a rendered chart, linked from the report.
  const report = readFileSync(join(dir, "BENCHMARKS.md"), "utf8");
  assert.match(report, /\| CPU stolen by the hypervisor \| \d+\.\d s \(/, "the run's stolen CPU in the machine table");
  // On PostgreSQL the per-token figure measures its commit floor beside it, and its hops floor on either database.
  const tokens = results.find((r) => r.figure === tokenLatency.title);
  if (report.includes("| databases | postgresql |"))
    assert.ok(
      ((tokens?.raw as { commitFloor?: { n: number } } | undefined)?.commitFloor?.n ?? 0) > 0,
      "per-token figure without its commit floor",
    );
  assert.ok(
    ((tokens?.raw as { hopsFloor?: { n: number } } | undefined)?.hopsFloor?.n ?? 0) > 0,
    "per-token figure without its hops floor",
  );
  // The login figure measures its floor (a bare login server) beside it.
  const login = results.find((r) => r.figure === loginThroughput.title);
  const loginRaw = login?.raw as
    | { floorRate?: number; databaseCpuMsPerLogin?: number; cpuRatioLogin?: number; cpuRatioFloor?: number }
    | undefined;
  assert.ok((loginRaw?.floorRate ?? 0) > 0, "login figure without its floor");
  // The ratio by CPU alone, for ours and the floor: what separates the login from the machine's idle time.
  for (const r of [loginRaw?.cpuRatioLogin, loginRaw?.cpuRatioFloor])
    assert.ok(Number.isFinite(r) && r! > 0, `login figure without its ratio by CPU (${r})`);
  assert.match(report, /by CPU alone \(a raw hash's against a login's/);
  // On a local PostgreSQL its ledger counts the database's CPU too (0 ms possible: 10 ms ticks, short windows).
  if (report.includes("| databases | postgresql |"))
    assert.equal(typeof loginRaw?.databaseCpuMsPerLogin, "number", "login figure without the database's CPU");
  const curves = results.flatMap((r) => r.curves ?? []);
  assert.ok(curves.length >= curveFigures.length, "a curve from every curve figure");
  for (const c of curves) {
    assert.ok(
      c.series.some((s) => s.points.length >= 2),
      `${c.title}: fewer than two sizes`,
    );
    assert.match(readFileSync(join(dir, CHART_DIR, `${c.id}.svg`), "utf8"), /^<svg[^>]*>.*<path/s, `${c.id}.svg`);
    assert.ok(report.includes(`](${CHART_DIR}/${c.id}.svg)`), `${c.id}: chart not linked`);
  }
  rmSync(dir, { recursive: true, force: true });
});
