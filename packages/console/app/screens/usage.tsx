import type { Usage } from "@platform/gen/agents/v1/usage_pb";
import { useEffect, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import type { Platform } from "../platform.ts";
import {
  type AgentSeries,
  type Day,
  type DayUsage,
  formatValue,
  mapLimit,
  type Metric,
  stackBars,
  utcDays,
} from "../usage-data.ts";

/** Agents drawn one by one; the rest (and deleted agents) are one "Other agents" series. */
const TOP_AGENTS = 8;
/** Requests to agents at once. */
const PARALLEL = 6;
const OTHER = "other";
// Fill colours (SVG attributes, not inline styles: the page's CSP allows no inline style).
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

const dayUsage = (u: Usage | undefined): DayUsage => ({
  tokens: Number(u?.inputTokens ?? 0n) + Number(u?.outputTokens ?? 0n),
  sandboxMs: Number(u?.sandboxWallMs ?? 0n),
});

/**
 * Tokens and sandbox time per agent and per UTC day, as stacked bar charts
 * (SVG drawn here: two charts of a few dozen rectangles need no charting
 * library) with the same numbers in a table. agents' GET /v1/usage sums one
 * range per call: one call per agent over the range finds the agents that
 * used anything, then one per (agent, day) for the top 8 of them and one per
 * day for the whole organization (the remainder is "Other agents").
 */
export function UsageScreen({ platform }: { platform: Platform }) {
  const [span, setSpan] = useState(7);
  const [series, setSeries] = useState<AgentSeries[]>();
  const [days, setDays] = useState<Day[]>([]);
  const { error, setError, fail } = useAction();
  const [generation, setGeneration] = useState(0);

  useEffect(() => {
    let live = true;
    setSeries(undefined);
    setError("");
    (async () => {
      const range = utcDays(new Date(), span);
      const since = range[0]!.since;
      const until = range.at(-1)!.until;
      const agents = [];
      for await (const a of platform.client.agents.all()) agents.push(a);
      const totals = await mapLimit(agents, PARALLEL, (a) => platform.usage.getUsage({ agentId: a.id, since, until }));
      const used = agents
        .map((a, i) => ({ agent: a, total: dayUsage(totals[i]!.usage) }))
        .filter((x) => x.total.tokens > 0 || x.total.sandboxMs > 0)
        .sort((x, y) => y.total.tokens - x.total.tokens || y.total.sandboxMs - x.total.sandboxMs)
        .slice(0, TOP_AGENTS);
      const cells = used.flatMap((x) => range.map((d) => ({ agentId: x.agent.id, day: d })));
      const perCell = await mapLimit(cells, PARALLEL, (c) =>
        platform.usage.getUsage({ agentId: c.agentId, since: c.day.since, until: c.day.until }),
      );
      const org = await mapLimit(range, PARALLEL, (d) => platform.usage.getUsage({ since: d.since, until: d.until }));
      const out: AgentSeries[] = used.map((x, i) => ({
        agentId: x.agent.id,
        name: x.agent.name,
        days: range.map((_, d) => dayUsage(perCell[i * range.length + d]!.usage)),
      }));
      // What the organization used beyond the agents drawn: other and deleted agents.
      const rest = range.map((_, d) => {
        const all = dayUsage(org[d]!.usage);
        const shown = out.reduce(
          (acc, s) => ({ tokens: acc.tokens + s.days[d]!.tokens, sandboxMs: acc.sandboxMs + s.days[d]!.sandboxMs }),
          { tokens: 0, sandboxMs: 0 },
        );
        return {
          tokens: Math.max(0, all.tokens - shown.tokens),
          sandboxMs: Math.max(0, all.sandboxMs - shown.sandboxMs),
        };
      });
      if (rest.some((r) => r.tokens > 0 || r.sandboxMs > 0))
        out.push({ agentId: OTHER, name: "Other agents", days: rest });
      if (!live) return;
      setDays(range);
      setSeries(out);
    })().catch((e) => live && fail(e));
    return () => {
      live = false;
    };
  }, [platform, span, generation]);

  const color = (i: number) => PALETTE[i % PALETTE.length]!;
  return (
    <section>
      <h1>Usage</h1>
      <div class="grid usage-controls">
        <label>
          Days
          <select
            aria-label="Days"
            value={String(span)}
            onChange={(e) => setSpan(Number((e.target as HTMLSelectElement).value))}
          >
            <option value="7">last 7 days</option>
            <option value="14">last 14 days</option>
            <option value="30">last 30 days</option>
          </select>
        </label>
        <div>
          <button type="button" class="secondary" onClick={() => setGeneration((g) => g + 1)}>
            Refresh
          </button>
        </div>
      </div>
      <ErrorAlert message={error} />
      {!series && !error && <p aria-busy="true">Reading usage…</p>}
      {series && series.length === 0 && <p>No usage in these days.</p>}
      {series && series.length > 0 && (
        <>
          <ul class="legend" aria-label="Agents">
            {series.map((s, i) => (
              <li key={s.agentId}>
                <svg width="12" height="12" aria-hidden="true">
                  <rect width="12" height="12" fill={color(i)} />
                </svg>{" "}
                {s.name}
              </li>
            ))}
          </ul>
          <Chart title="Tokens per day" metric="tokens" series={series} days={days} color={color} />
          <Chart title="Sandbox time per day" metric="sandboxMs" series={series} days={days} color={color} />
          <h2>By agent and day</h2>
          <div class="table-scroll">
            <table data-testid="usage-table">
              <thead>
                <tr>
                  <th scope="col">Agent</th>
                  <th scope="col">Day (UTC)</th>
                  <th scope="col">Tokens</th>
                  <th scope="col">Sandbox time</th>
                </tr>
              </thead>
              <tbody>
                {series.flatMap((s) =>
                  days
                    .map((d, i) => ({ d, u: s.days[i]! }))
                    .filter(({ u }) => u.tokens > 0 || u.sandboxMs > 0)
                    .map(({ d, u }) => (
                      <tr key={`${s.agentId}-${d.label}`} data-testid={`usage-${s.name}-${d.label}`}>
                        <td>{s.name}</td>
                        <td>{d.label}</td>
                        <td>{u.tokens}</td>
                        <td>{formatValue("sandboxMs", u.sandboxMs)}</td>
                      </tr>
                    )),
                )}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

const W = 720;
const H = 240;
const PAD = { left: 56, right: 8, top: 12, bottom: 28 };

function Chart({
  title,
  metric,
  series,
  days,
  color,
}: {
  title: string;
  metric: Metric;
  series: AgentSeries[];
  days: Day[];
  color: (i: number) => string;
}) {
  const { bars, max } = stackBars(series, days, metric);
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, bars.length);
  const barW = Math.max(2, slot * 0.7);
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  const index = new Map(series.map((s, i) => [s.agentId, i]));
  // Label every day when they fit, else about seven of them.
  const every = Math.max(1, Math.ceil(bars.length / 7));
  const total = bars.reduce((a, b) => a + b.total, 0);
  return (
    <figure>
      <figcaption>
        <strong>{title}</strong> <small class="muted">(UTC days; total {formatValue(metric, total)})</small>
      </figcaption>
      <svg
        viewBox={`0 0 ${W} ${H}`}
        class="usage-chart"
        role="img"
        aria-label={`${title}: ${bars.map((b) => `${b.day} ${formatValue(metric, b.total)}`).join(", ")}`}
        data-testid={`chart-${metric}`}
      >
        {[0, 0.5, 1].map((f) => (
          <g key={f}>
            <line x1={PAD.left} x2={W - PAD.right} y1={y(max * f)} y2={y(max * f)} class="grid-line" />
            <text x={PAD.left - 6} y={y(max * f) + 4} text-anchor="end" class="axis">
              {formatValue(metric, max * f)}
            </text>
          </g>
        ))}
        {bars.map((b, d) => {
          const x = PAD.left + d * slot + (slot - barW) / 2;
          return (
            <g key={b.day} data-day={b.day}>
              {b.segments.map((s) => (
                <rect
                  key={s.agentId}
                  x={x}
                  y={y(s.y1)}
                  width={barW}
                  height={Math.max(1, y(s.y0) - y(s.y1))}
                  fill={color(index.get(s.agentId) ?? 0)}
                  data-agent={s.name}
                  data-value={s.value}
                >
                  <title>{`${s.name}, ${s.day}: ${formatValue(metric, s.value)}`}</title>
                </rect>
              ))}
              {d % every === 0 && (
                <text x={x + barW / 2} y={H - 8} text-anchor="middle" class="axis">
                  {b.day.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
