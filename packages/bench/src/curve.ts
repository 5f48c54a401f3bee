import type { FigureResult } from "./figure.ts";
import { fmtBytes, fmtMs } from "./stats.ts";

/**
 * How a cost grows with the work: y measured at a few sizes x, one line per
 * series, judged against its goal. Any figure can emit curves by returning
 * them in its result (`FigureResult.curves`); the runner prints each as a
 * small table, renders its chart to `docs/bench/<id>.svg` beside the
 * Markdown file (src/chart.ts) and links it from the "Cost as the work
 * grows" section. Build one with `flatCurve` or `linearCurve`, which judge it.
 */
export interface Curve {
  /** File name of its chart (`<id>.svg`): unique in a run. */
  id: string;
  title: string;
  x: { label: string; scale?: "linear" | "log" | "symlog" };
  /** "ms" and "bytes" are formatted as such in the table (bytes drawn in MiB); anything else is printed after the number. */
  y: { label: string; unit: string };
  series: CurveSeries[];
  goal: string;
  met: boolean | undefined;
  /** One line: what was compared (met or missed is `met`). */
  verdict: string;
  /** Horizontal lines drawn on the chart (a flat curve's ceiling). */
  rules?: Array<{ y: number; label: string }>;
  /** Text columns added to the table, one value per size (e.g. memory per stream). */
  columns?: Array<{ name: string; values: string[] }>;
  notes?: string;
}

export interface CurveSeries {
  name: string;
  points: Array<{ x: number; y: number }>;
  /** A derived line (a fit): dashed, and not a table column. */
  derived?: boolean;
}

const sizesOf = (series: CurveSeries[]): number[] =>
  [...new Set(series.filter((s) => !s.derived).flatMap((s) => s.points.map((p) => p.x)))].sort((a, b) => a - b);

export function formatY(curve: Pick<Curve, "y">, v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return "n/a";
  if (curve.y.unit === "ms") return fmtMs(v);
  if (curve.y.unit === "bytes") return v < 0 ? `−${fmtBytes(-v)}` : fmtBytes(v);
  return `${Number(v.toPrecision(3))} ${curve.y.unit}`;
}

export const fmtCount = (n: number): string =>
  n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : n.toLocaleString("en-US");

type CurveInput = Omit<Curve, "goal" | "met" | "verdict" | "rules"> & { notes?: string };

/**
 * Goal "flat": the judged series' value at the largest size within `factor` × its
 * value at the smallest (the issue's "p50 at the largest size within 2× of the smallest").
 */
export function flatCurve(input: CurveInput & { judged: string; factor?: number }): Curve {
  const factor = input.factor ?? 2;
  const judged = input.series.find((s) => s.name === input.judged);
  if (!judged) throw new Error(`curve ${input.id}: no series ${input.judged}`);
  const pts = [...judged.points].sort((a, b) => a.x - b.x);
  const first = pts[0];
  const last = pts.at(-1);
  const goal = `${input.judged} at the largest size ≤ ${factor}× ${input.judged} at the smallest`;
  if (!first || !last || pts.length < 2 || !Number.isFinite(first.y) || !Number.isFinite(last.y)) {
    return { ...input, goal, met: undefined, verdict: "fewer than two sizes measured" };
  }
  const ratio = last.y / first.y;
  const met = ratio <= factor;
  return {
    ...input,
    goal,
    met,
    rules: [{ y: factor * first.y, label: `${factor}× ${input.judged} at ${fmtCount(first.x)}` }],
    verdict: `${input.judged} ${formatY(input, last.y)} at ${fmtCount(last.x)} = ${ratio.toFixed(2)}× ${formatY(input, first.y)} at ${fmtCount(first.x)}`,
  };
}

export interface LinearFit {
  slope: number;
  intercept: number;
  r2: number;
}

/** Least squares y = intercept + slope·x. */
export function linearFit(points: ReadonlyArray<{ x: number; y: number }>): LinearFit {
  const n = points.length;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const p of points) {
    sxy += (p.x - mx) * (p.y - my);
    sxx += (p.x - mx) ** 2;
    syy += (p.y - my) ** 2;
  }
  const slope = sxx === 0 ? Number.NaN : sxy / sxx;
  const intercept = my - slope * mx;
  const r2 = syy === 0 ? 1 : (sxy * sxy) / (sxx * syy);
  return { slope, intercept, r2 };
}

/**
 * Goal "linear with a stated constant": the judged series fits y = a + b·x
 * with R² ≥ `minR2` and b ≤ `maxSlope` (in y's unit per x). The fit is added
 * as a derived series.
 */
export function linearCurve(
  input: CurveInput & { judged: string; maxSlope: number; minR2?: number; slopeLabel: string },
): Curve & { fit: LinearFit } {
  const minR2 = input.minR2 ?? 0.99;
  const judged = input.series.find((s) => s.name === input.judged);
  if (!judged) throw new Error(`curve ${input.id}: no series ${input.judged}`);
  const { judged: _j, maxSlope, minR2: _m, slopeLabel, ...rest } = input;
  const constant = input.y.unit === "bytes" ? `${maxSlope / 1000} kB` : formatY(input, maxSlope);
  const goal = `${input.judged} linear in n (R² ≥ ${minR2}) with ≤ ${constant} ${slopeLabel}`;
  if (judged.points.length < 2) {
    return { ...rest, goal, met: undefined, verdict: "fewer than two sizes measured", fit: linearFit([]) };
  }
  const fit = linearFit(judged.points);
  const met = fit.r2 >= minR2 && fit.slope <= maxSlope;
  const xs = judged.points.map((p) => p.x);
  const span = [Math.min(...xs), Math.max(...xs)];
  return {
    ...rest,
    series: [
      ...input.series,
      {
        name: `fit: ${formatY(input, fit.intercept)} + ${formatY(input, fit.slope)} × n (R² ${fit.r2.toFixed(3)})`,
        points: span.map((x) => ({ x, y: fit.intercept + fit.slope * x })),
        derived: true,
      },
    ],
    goal,
    met,
    fit,
    verdict: `${input.judged} = ${formatY(input, fit.intercept)} + ${formatY(input, fit.slope)} × n, i.e. ${formatY(input, fit.slope)} ${slopeLabel} (R² ${fit.r2.toFixed(4)})`,
  };
}

/** The figure row of a curve: its smallest size as the baseline, its largest as the measurement. */
export function curveRow(
  curve: Curve,
  judged: string,
  extra: {
    notes?: string;
    raw?: Record<string, unknown>;
    row?: Partial<Pick<FigureResult, "baseline" | "measured" | "ratio">>;
  } = {},
): Omit<FigureResult, "figure" | "goal"> {
  const s = curve.series.find((x) => x.name === judged);
  const pts = [...(s?.points ?? [])].sort((a, b) => a.x - b.x);
  const first = pts[0];
  const last = pts.at(-1);
  const at = (p: { x: number; y: number } | undefined) =>
    p ? `${judged} ${formatY(curve, p.y)} at ${fmtCount(p.x)}` : "—";
  return {
    baseline: at(first),
    measured: at(last),
    ratio: first && last && pts.length > 1 ? `${(last.y / first.y).toFixed(2)}×` : "—",
    met: curve.met,
    notes: [curve.verdict, extra.notes ?? curve.notes].filter(Boolean).join(". "),
    raw: { ...extra.raw, series: curve.series },
    curves: [curve],
    ...extra.row,
  };
}

/** A curve as a Markdown table: one row per size, one column per measured series. */
export function curveTable(curve: Curve): string {
  const measured = curve.series.filter((s) => !s.derived);
  const sizes = sizesOf(curve.series);
  const head = [curve.x.label, ...measured.map((s) => s.name), ...(curve.columns ?? []).map((c) => c.name)];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  sizes.forEach((x, i) => {
    const cells = [
      fmtCount(x),
      ...measured.map((s) => formatY(curve, s.points.find((p) => p.x === x)?.y)),
      ...(curve.columns ?? []).map((c) => c.values[i] ?? ""),
    ];
    lines.push(`| ${cells.join(" | ")} |`);
  });
  return lines.join("\n");
}

/** The "Cost as the work grows" section: per curve its goal and verdict, its table and its chart's link. */
export function curvesSection(curves: Curve[], chartLinks: Map<string, string>): string {
  if (curves.length === 0) return "";
  const parts = curves.map((c) => {
    const link = chartLinks.get(c.id);
    const verdict = c.met === undefined ? "not measured" : c.met ? "met" : "missed";
    return [
      `### ${c.title}`,
      "",
      `Goal: ${c.goal}. **${verdict}**: ${c.verdict}.${c.notes ? ` ${c.notes}` : ""}`,
      "",
      curveTable(c),
      ...(link ? ["", `![${c.title}](${link})`] : []),
    ].join("\n");
  });
  return `## Cost as the work grows\n\n${parts.join("\n\n")}\n`;
}
