import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as vega from "vega";
import * as vl from "vega-lite";
import type { Curve } from "./curve.ts";

/** Where the charts go, relative to the Markdown file that links them. */
export const CHART_DIR = "docs/bench";

const MIB = 2 ** 20;

/**
 * A curve as an SVG line chart: vega-lite compiled to a vega view rendered
 * headless (no canvas, no browser). Bytes are drawn in MiB; derived series
 * (fits) dashed; rules (a flat curve's ceiling) as grey dashed lines.
 */
export async function renderChart(curve: Curve): Promise<string> {
  const bytes = curve.y.unit === "bytes";
  const scaleY = (y: number) => (bytes ? y / MIB : y);
  const yTitle = `${curve.y.label} (${bytes ? "MiB" : curve.y.unit})`;
  const values = curve.series.flatMap((s) =>
    s.points
      .filter((p) => Number.isFinite(p.y))
      .map((p) => ({ x: p.x, y: scaleY(p.y), series: s.name, derived: s.derived === true })),
  );
  const xScale = curve.x.scale ?? "linear";
  const sizes = [...new Set(values.filter((v) => !v.derived).map((v) => v.x))].sort((a, b) => a - b);
  const x = {
    field: "x",
    type: "quantitative",
    title: curve.x.label,
    scale: { type: xScale, ...(xScale === "linear" ? { zero: true } : {}) },
    axis: { values: sizes, labelExpr: "datum.value >= 1000 ? format(datum.value / 1000, ',') + 'k' : datum.value" },
  };
  const layers: unknown[] = [
    {
      mark: { type: "line", point: true },
      encoding: {
        x,
        y: { field: "y", type: "quantitative", title: yTitle, scale: { zero: true } },
        color: { field: "series", type: "nominal", title: null, legend: { orient: "bottom", labelLimit: 400 } },
        strokeDash: {
          field: "derived",
          type: "nominal",
          legend: null,
          scale: {
            domain: [false, true],
            range: [
              [1, 0],
              [5, 4],
            ],
          },
        },
      },
    },
  ];
  for (const rule of curve.rules ?? []) {
    layers.push({
      data: { values: [{ y: scaleY(rule.y), label: rule.label }] },
      layer: [
        {
          mark: { type: "rule", strokeDash: [3, 3], color: "#888" },
          encoding: { y: { field: "y", type: "quantitative" } },
        },
        {
          mark: { type: "text", align: "left", dx: 4, dy: -6, color: "#666", fontSize: 10 },
          encoding: { y: { field: "y", type: "quantitative" }, x: { value: 0 }, text: { field: "label" } },
        },
      ],
    });
  }
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: {
      text: curve.title,
      subtitle: `${curve.met === undefined ? "not measured" : curve.met ? "met" : "missed"}: ${curve.verdict}`,
      anchor: "start",
      fontSize: 13,
      subtitleFontSize: 10,
    },
    width: 480,
    height: 240,
    background: "white",
    data: { values },
    layer: layers,
  };
  const compiled = vl.compile(spec as vl.TopLevelSpec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Renders every curve into `<dir of the Markdown file>/docs/bench/<id>.svg`; returns the relative links. */
export async function writeCharts(curves: Curve[], markdownDir: string): Promise<Map<string, string>> {
  const links = new Map<string, string>();
  if (curves.length === 0) return links;
  mkdirSync(join(markdownDir, CHART_DIR), { recursive: true });
  for (const curve of curves) {
    const file = `${CHART_DIR}/${curve.id}.svg`;
    writeFileSync(join(markdownDir, file), await renderChart(curve));
    links.set(curve.id, file);
  }
  return links;
}
