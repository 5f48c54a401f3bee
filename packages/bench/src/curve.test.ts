import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CHART_DIR, renderChart, writeCharts } from "./chart.ts";
import { curveRow, curvesSection, curveTable, flatCurve, linearCurve, linearFit } from "./curve.ts";

const pts = (xs: number[], f: (x: number) => number) => xs.map((x) => ({ x, y: f(x) }));

test("flatCurve judges the largest size against the smallest, at the given factor", () => {
  const make = (last: number) =>
    flatCurve({
      id: "t",
      title: "t",
      x: { label: "n" },
      y: { label: "latency", unit: "ms" },
      series: [
        {
          name: "p50",
          points: [
            { x: 1, y: 10 },
            { x: 10, y: 30 },
            { x: 100, y: last },
          ],
        },
      ],
      judged: "p50",
    });
  assert.equal(make(20).met, true);
  assert.equal(make(20.1).met, false, "2.01× is not within 2×");
  assert.equal(make(20).rules?.[0]?.y, 20, "the ceiling drawn at 2× the smallest");
  assert.match(make(25).verdict, /25\.0 ms at 100 = 2\.50× 10\.0 ms at 1/);
  const one = flatCurve({
    id: "t",
    title: "t",
    x: { label: "n" },
    y: { label: "l", unit: "ms" },
    series: [{ name: "p50", points: [{ x: 1, y: 1 }] }],
    judged: "p50",
  });
  assert.equal(one.met, undefined, "one size is not a curve");
});

test("linearFit and linearCurve: slope, intercept, R² and the stated constant", () => {
  const exact = linearFit(pts([1000, 5000, 10_000, 20_000], (x) => 5e6 + 48_000 * x));
  assert.ok(Math.abs(exact.slope - 48_000) < 1e-6);
  assert.ok(Math.abs(exact.intercept - 5e6) < 1e-3);
  assert.ok(Math.abs(exact.r2 - 1) < 1e-12);
  const base = { id: "m", title: "m", x: { label: "streams" }, y: { label: "RSS", unit: "bytes" } };
  const judge = { ...base, judged: "RSS", maxSlope: 50_000, slopeLabel: "per stream" };
  const ok = linearCurve({
    ...judge,
    series: [{ name: "RSS", points: pts([1000, 5000, 10_000, 20_000], (x) => 48_000 * x) }],
  });
  assert.equal(ok.met, true);
  assert.match(ok.goal, /≤ 50 kB per stream/);
  assert.equal(ok.series.filter((s) => s.derived).length, 1, "the fit is added as a derived series");
  const steep = linearCurve({ ...judge, series: [{ name: "RSS", points: pts([1, 2, 3], (x) => 60_000 * x) }] });
  assert.equal(steep.met, false, "a slope above the constant misses");
  const bent = linearCurve({
    ...judge,
    series: [{ name: "RSS", points: pts([1, 2, 3, 4, 5], (x) => 1000 * x ** 4) }],
    maxSlope: 1e12,
  });
  assert.ok(bent.fit.r2 < 0.99);
  assert.equal(bent.met, false, "growth that is not linear misses");
});

test("a curve's row, table, section and SVG chart", async () => {
  const curve = flatCurve({
    id: "exec-vs-live",
    title: "exec vs live",
    x: { label: "live", scale: "log" },
    y: { label: "exec", unit: "ms" },
    series: [
      { name: "p50", points: pts([1, 10, 100], (x) => 5 + Math.log10(x)) },
      { name: "p99", points: pts([1, 10, 100], (x) => 9 + x / 10) },
    ],
    columns: [{ name: "samples", values: ["300", "300", "280"] }],
    judged: "p50",
  });
  const row = curveRow(curve, "p50");
  assert.equal(row.baseline, "p50 5.00 ms at 1");
  assert.equal(row.measured, "p50 7.00 ms at 100");
  assert.equal(row.ratio, "1.40×");
  assert.deepEqual(row.curves, [curve]);
  const table = curveTable(curve);
  assert.match(table, /^\| live \| p50 \| p99 \| samples \|/);
  assert.match(table, /\| 100 \| 7\.00 ms \| 19\.0 ms \| 280 \|/);
  const section = curvesSection([curve], new Map([[curve.id, `${CHART_DIR}/${curve.id}.svg`]]));
  assert.match(section, /## Cost as the work grows/);
  assert.match(section, /\*\*met\*\*/);
  assert.ok(section.includes(`![exec vs live](${CHART_DIR}/exec-vs-live.svg)`));

  const svg = await renderChart(curve);
  assert.match(svg, /^<svg/);
  // Both series and the 2× ceiling are drawn, and the title and verdict are written.
  assert.ok((svg.match(/<path[^>]*class="[^"]*"|<path /g) ?? []).length >= 3);
  assert.ok(svg.includes("exec vs live"));
  assert.ok(svg.includes("p99"));
  assert.ok(svg.includes("2× p50 at 1"));

  const dir = mkdtempSync(join(tmpdir(), "curve-test-"));
  try {
    const links = await writeCharts([curve], dir);
    assert.equal(links.get(curve.id), `${CHART_DIR}/exec-vs-live.svg`);
    assert.equal(readFileSync(join(dir, CHART_DIR, "exec-vs-live.svg"), "utf8"), svg);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
