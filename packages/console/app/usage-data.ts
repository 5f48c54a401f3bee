// The usage chart's data: UTC days, the per-agent-per-day requests to agents'
// GET /v1/usage (it sums one range per call), and the stacked bars' geometry.
// No DOM: unit-tested in src/usage-data.test.ts.

export interface Day {
  /** YYYY-MM-DD (UTC). */
  label: string;
  /** RFC 3339: the day's start and the next day's (exclusive). */
  since: string;
  until: string;
}

/** The last `count` UTC days up to and including `now`'s, oldest first. */
export function utcDays(now: Date, count: number): Day[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const days: Day[] = [];
  for (let i = count - 1; i >= 0; i--) {
    const start = new Date(today - i * 86_400_000);
    const end = new Date(start.getTime() + 86_400_000);
    days.push({ label: start.toISOString().slice(0, 10), since: start.toISOString(), until: end.toISOString() });
  }
  return days;
}

/** What one agent used on one day (the fields of agents' Usage the chart shows). */
export interface DayUsage {
  tokens: number;
  sandboxMs: number;
}

export interface AgentSeries {
  agentId: string;
  name: string;
  /** One per day, in the days' order. */
  days: DayUsage[];
}

export type Metric = keyof DayUsage;

/** Runs `fn` over `items` with at most `limit` at once, keeping their order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** A round axis maximum at or above `v` (1, 2 or 5 × 10^n). */
export function niceMax(v: number): number {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export interface Segment {
  agentId: string;
  name: string;
  day: string;
  value: number;
  /** In chart units: bottom-up from 0, stacked in series order. */
  y0: number;
  y1: number;
}

/** Each day's bar as segments stacked in series order; zero values leave none. Also the axis maximum. */
export function stackBars(series: readonly AgentSeries[], days: readonly Day[], metric: Metric) {
  const bars = days.map((day, d) => {
    let y = 0;
    const segments: Segment[] = [];
    for (const s of series) {
      const value = s.days[d]?.[metric] ?? 0;
      if (value <= 0) continue;
      segments.push({ agentId: s.agentId, name: s.name, day: day.label, value, y0: y, y1: y + value });
      y += value;
    }
    return { day: day.label, total: y, segments };
  });
  const max = niceMax(Math.max(0, ...bars.map((b) => b.total)));
  return { bars, max };
}

/** A value as the chart labels it. */
export function formatValue(metric: Metric, v: number): string {
  if (metric === "sandboxMs")
    return v >= 10_000 ? `${(v / 1000).toFixed(0)} s` : v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${v} ms`;
  return v >= 10_000 ? `${(v / 1000).toFixed(0)}k` : String(v);
}
