// `platform usage`: the agents service's usage records (issue 20), summed for
// a session, an agent or the organization over a time range, as a table.
import { isUuid } from "@platform/errors";
import { type Context, type Flags, resolveAgent } from "./commands.ts";
import { UsageError } from "./endpoints.ts";
import type { CommandSpec } from "./spec.ts";

const TIME_HELP = "RFC 3339 (2026-01-31T00:00:00Z) or a span back from now (30m, 24h, 7d)";

export const USAGE_COMMANDS: CommandSpec[] = [
  {
    path: ["usage"],
    summary: "tokens per model, tool calls and sandbox time: of a session, an agent or the whole org, over a range",
    options: {
      session: { type: "string", value: "id", help: "one session's usage (with its budgets when no range is given)" },
      agent: { type: "string", value: "id|slug", help: "one agent's sessions" },
      since: { type: "string", value: "time", help: `from this time (${TIME_HELP}; default: the beginning)` },
      until: { type: "string", value: "time", help: `to this time, exclusive (${TIME_HELP}; default: now)` },
    },
  },
];

/** Budgets as the API returns them: a limit, or null / absent for none. */
type Budgets = { maxTokens?: number | null; maxToolCalls?: number | null; maxCpuSeconds?: number | null };
type ModelUsage = { model: string; inputTokens: number; outputTokens: number; calls: number };
type Usage = {
  inputTokens: number;
  outputTokens: number;
  modelCalls: number;
  toolCalls: number;
  sandboxCpuMs: number;
  sandboxWallMs: number;
  models: ModelUsage[];
};
type SessionUsage = { sessionId: string; agentId: string; usage: Usage; budgets: Budgets; effectiveBudgets: Budgets };
type RangeUsage = { usage: Usage; since: string; until: string; sessions: number };

/** `--since`/`--until`: RFC 3339 as given, or `<n>m|h|d` back from `now`. */
export function timeFlag(name: string, value: string | undefined, now = Date.now()): string | undefined {
  if (value === undefined) return undefined;
  const span = /^(\d+)([mhd])$/.exec(value.trim());
  if (span) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as "m" | "h" | "d"];
    return new Date(now - Number(span[1]) * unit).toISOString();
  }
  if (!Number.isNaN(Date.parse(value)) && /^\d{4}-\d{2}-\d{2}T/.test(value)) return value;
  throw new UsageError(`--${name} must be ${TIME_HELP}`);
}

export async function usageCommand(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const base = client.endpoints.agents;
  const session = typeof flags.session === "string" ? flags.session : undefined;
  const agentRef = typeof flags.agent === "string" ? flags.agent : undefined;
  const since = timeFlag("since", typeof flags.since === "string" ? flags.since : undefined);
  const until = timeFlag("until", typeof flags.until === "string" ? flags.until : undefined);
  if (session !== undefined && agentRef !== undefined) throw new UsageError("give --session or --agent, not both");
  if (session !== undefined && !isUuid(session)) throw new UsageError("--session must be a session id");

  if (session !== undefined && since === undefined && until === undefined) {
    const res = await client.request<SessionUsage>("GET", `${base}/v1/sessions/${encodeURIComponent(session)}/usage`);
    if (ctx.io.json) return ctx.io.value(res);
    ctx.io.line(`session ${res.sessionId} (agent ${res.agentId})`);
    printUsage(ctx, res.usage);
    ctx.io.line(`budgets: ${budgetsText(res.effectiveBudgets)}`);
    return;
  }
  const agentId =
    agentRef === undefined ? undefined : isUuid(agentRef) ? agentRef : (await resolveAgent(client, agentRef)).id;
  const query = new URLSearchParams();
  if (session !== undefined) query.set("sessionId", session);
  if (agentId !== undefined) query.set("agentId", agentId);
  if (since !== undefined) query.set("since", since);
  if (until !== undefined) query.set("until", until);
  const text = query.toString();
  const res = await client.request<RangeUsage>("GET", `${base}/v1/usage${text ? `?${text}` : ""}`);
  if (ctx.io.json) return ctx.io.value(res);
  const scope =
    session !== undefined ? `session ${session}` : agentId !== undefined ? `agent ${agentRef}` : "organization";
  ctx.io.line(`${scope}, ${res.since} to ${res.until}: ${res.sessions} session(s)`);
  printUsage(ctx, res.usage);
}

function printUsage(ctx: Context, u: Usage): void {
  const rows = [
    ["MODEL", "CALLS", "INPUT", "OUTPUT"],
    ...u.models.map((m) => [m.model, String(m.calls), String(m.inputTokens), String(m.outputTokens)]),
    ["total", String(u.modelCalls), String(u.inputTokens), String(u.outputTokens)],
  ];
  const width = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows)
    ctx.io.line(r.map((cell, i) => (i === 0 ? cell.padEnd(width[i]!) : cell.padStart(width[i]!))).join("  "));
  ctx.io.line(
    `tool calls: ${u.toolCalls}  sandbox CPU: ${seconds(u.sandboxCpuMs)}  sandbox wall: ${seconds(u.sandboxWallMs)}`,
  );
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(3)} s`;
}

function budgetsText(b: Budgets): string {
  const parts = [
    b.maxTokens ? `${b.maxTokens} tokens` : "",
    b.maxToolCalls ? `${b.maxToolCalls} tool calls` : "",
    b.maxCpuSeconds ? `${b.maxCpuSeconds} CPU s` : "",
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(", ") : "none";
}

/** `--max-tokens`, `--max-tool-calls`, `--max-cpu-seconds` of agents create/update: the `budgets` body field. */
export function budgetFlags(flags: Flags): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  for (const [flag, field] of [
    ["max-tokens", "maxTokens"],
    ["max-tool-calls", "maxToolCalls"],
    ["max-cpu-seconds", "maxCpuSeconds"],
  ] as const) {
    const v = flags[flag];
    if (typeof v !== "string") continue;
    if (!/^\d{1,15}$/.test(v)) throw new UsageError(`--${flag} must be a whole number (0: no limit)`);
    out[field] = Number(v);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export const BUDGET_OPTIONS = {
  "max-tokens": {
    type: "string",
    value: "n",
    help: "budget: input + output tokens per session (0: none); a run reaching it ends with budget_reached",
  },
  "max-tool-calls": { type: "string", value: "n", help: "budget: tool calls per session (0: none)" },
  "max-cpu-seconds": { type: "string", value: "n", help: "budget: sandbox CPU seconds per session (0: none)" },
} as const;
