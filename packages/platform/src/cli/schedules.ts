// `platform schedules ...`: an agent's schedules (issue 25): a cron expression
// in a time zone sending a message to a new session per firing or to one
// session; their next runs, pause and resume, and the history of firings.
import { isUuid } from "@platform/errors";
import { type Context, type Flags, need, resolveAgent } from "./commands.ts";
import { UsageError } from "./endpoints.ts";
import type { CommandSpec, OptionSpec } from "./spec.ts";

type Schedule = {
  id: string;
  agentId: string;
  cron: string;
  timeZone: string;
  message: string;
  target: string;
  sessionId: string;
  catchUp: string;
  enabled: boolean;
  nextRuns: string[];
};
type Firing = { slotTime: string; status: string; reason: string; sessionId: string; runId: string };
type Page<T> = { items: T[]; next?: string | null };

const idArg = { args: "<schedule id>", min: 1, max: 1 };
const nextOption: OptionSpec = { type: "string", value: "n", help: "how many next runs to show, 0 to 50 (default 5)" };

export const SCHEDULE_COMMANDS: CommandSpec[] = [
  {
    path: ["schedules", "create"],
    summary: "send a message to an agent on a cron schedule (a new session per firing, or --session)",
    options: {
      agent: { type: "string", value: "id|slug", help: "the agent", required: true },
      cron: {
        type: "string",
        value: "expr",
        help: 'five fields, e.g. "0 9 * * 1-5" (slots at least a minute apart)',
        required: true,
      },
      message: { type: "string", value: "text", help: "the user message each firing sends", required: true },
      tz: { type: "string", value: "zone", help: "IANA time zone of the expression (default UTC), e.g. Europe/Berlin" },
      session: { type: "string", value: "id", help: "continue this session at every firing instead of a new one" },
      "catch-up": {
        type: "string",
        value: "skip|one",
        help: "slots missed while the service was down: skip (default) or run the latest one once",
      },
      paused: { type: "boolean", help: "create it paused" },
    },
  },
  {
    path: ["schedules", "list"],
    summary: "an agent's schedules with their next runs",
    isDefault: true,
    options: {
      agent: { type: "string", value: "id|slug", help: "the agent", required: true },
      next: nextOption,
      limit: { type: "string", value: "n", help: "schedules per page, 1 to 100 (default 20)" },
      after: { type: "string", value: "cursor", help: "the page after this cursor" },
    },
  },
  { path: ["schedules", "get"], summary: "a schedule and its next runs", ...idArg, options: { next: nextOption } },
  { path: ["schedules", "pause"], summary: "stop a schedule's firings until it is resumed", ...idArg },
  {
    path: ["schedules", "resume"],
    summary: "fire again from the next slot (the slots it was paused over never fire)",
    ...idArg,
  },
  { path: ["schedules", "rm"], summary: "delete a schedule (the sessions it created stay)", ...idArg },
  {
    path: ["schedules", "firings"],
    summary: "a schedule's firings, newest first: slot, outcome, session",
    ...idArg,
    options: { limit: { type: "string", value: "n", help: "firings per page, 1 to 100 (default 20)" } },
  },
];

type Handler = (ctx: Context, args: string[], flags: Flags) => Promise<unknown>;

export const scheduleHandlers: Record<string, Handler> = {
  "schedules create": (ctx, _args, flags) => schedulesCreate(ctx, flags),
  "schedules list": (ctx, _args, flags) => schedulesList(ctx, flags),
  "schedules get": (ctx, args, flags) => schedulesGet(ctx, args[0]!, flags),
  "schedules pause": (ctx, args) => setEnabled(ctx, args[0]!, false),
  "schedules resume": (ctx, args) => setEnabled(ctx, args[0]!, true),
  "schedules rm": (ctx, args) => schedulesRemove(ctx, args[0]!),
  "schedules firings": (ctx, args, flags) => schedulesFirings(ctx, args[0]!, flags),
};

const str = (flags: Flags, name: string): string | undefined =>
  typeof flags[name] === "string" ? (flags[name] as string) : undefined;

function scheduleId(id: string): string {
  if (!isUuid(id)) throw new UsageError("the schedule id must be a UUID (platform schedules list --agent A)");
  return id;
}

function nextQuery(flags: Flags): string {
  const next = str(flags, "next");
  if (next === undefined) return "";
  if (!/^\d{1,2}$/.test(next)) throw new UsageError("--next must be a number from 0 to 50");
  return `nextRuns=${next}`;
}

async function schedulesCreate(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const agent = await resolveAgent(client, need(flags, "agent"));
  const session = str(flags, "session");
  const created = await client.request<Schedule>("POST", `${client.endpoints.agents}/v1/agents/${agent.id}/schedules`, {
    body: {
      cron: need(flags, "cron"),
      message: need(flags, "message"),
      timeZone: str(flags, "tz") ?? "",
      target: session ? "session" : "new_session",
      sessionId: session ?? "",
      catchUp: str(flags, "catch-up") ?? "",
      enabled: flags.paused !== true,
    },
  });
  if (ctx.io.json) return ctx.io.value(created);
  ctx.io.line(`created schedule ${created.id} for agent ${agent.slug}`);
  printSchedule(ctx, created);
}

async function schedulesList(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const agent = await resolveAgent(client, need(flags, "agent"));
  const query = new URLSearchParams();
  for (const name of ["limit", "after"]) if (str(flags, name) !== undefined) query.set(name, str(flags, name)!);
  const next = nextQuery(flags);
  const text = [query.toString(), next].filter(Boolean).join("&");
  const page = await client.request<Page<Schedule>>(
    "GET",
    `${client.endpoints.agents}/v1/agents/${agent.id}/schedules${text ? `?${text}` : ""}`,
  );
  if (ctx.io.json) return ctx.io.value({ items: page.items, next: page.next ?? null });
  if (page.items.length === 0) ctx.io.err("no schedules");
  for (const s of page.items) {
    const state = s.enabled ? "enabled" : "paused";
    const next = s.nextRuns.length > 0 ? `next ${s.nextRuns.join(", ")}` : "no next run";
    ctx.io.line(`${s.id}  ${s.cron}  ${s.timeZone}  ${state}  ${targetText(s)}  ${next}`);
  }
  if (page.next) ctx.io.err(`(more: --after ${page.next})`);
}

async function schedulesGet(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const next = nextQuery(flags);
  const s = await client.request<Schedule>(
    "GET",
    `${client.endpoints.agents}/v1/schedules/${scheduleId(id)}${next ? `?${next}` : ""}`,
  );
  if (ctx.io.json) return ctx.io.value(s);
  printSchedule(ctx, s);
}

async function setEnabled(ctx: Context, id: string, enabled: boolean): Promise<void> {
  const client = ctx.client();
  const s = await client.request<Schedule>("PATCH", `${client.endpoints.agents}/v1/schedules/${scheduleId(id)}`, {
    body: { enabled },
  });
  if (ctx.io.json) return ctx.io.value(s);
  ctx.io.line(`${enabled ? "resumed" : "paused"} schedule ${s.id}`);
  printSchedule(ctx, s);
}

async function schedulesRemove(ctx: Context, id: string): Promise<void> {
  const client = ctx.client();
  await client.request("DELETE", `${client.endpoints.agents}/v1/schedules/${scheduleId(id)}`);
  if (ctx.io.json) ctx.io.value({ deleted: id });
  else ctx.io.line(`deleted schedule ${id}; the sessions it created stay`);
}

async function schedulesFirings(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const limit = str(flags, "limit");
  if (limit !== undefined && !/^\d+$/.test(limit)) throw new UsageError("--limit must be a number from 1 to 100");
  const page = await client.request<Page<Firing>>(
    "GET",
    `${client.endpoints.agents}/v1/schedules/${scheduleId(id)}/firings${limit ? `?limit=${limit}` : ""}`,
  );
  if (ctx.io.json) return ctx.io.value({ items: page.items, next: page.next ?? null });
  if (page.items.length === 0) ctx.io.err("no firings yet");
  for (const f of page.items) {
    const why = f.reason ? ` (${f.reason})` : "";
    ctx.io.line(`${f.slotTime}  ${f.status}${why}  ${f.sessionId ? `session ${f.sessionId}` : "-"}`);
  }
}

function targetText(s: Schedule): string {
  return s.target === "session" ? `session ${s.sessionId}` : "new session each time";
}

function printSchedule(ctx: Context, s: Schedule): void {
  ctx.io.line(`  cron ${s.cron} (${s.timeZone}), ${s.enabled ? "enabled" : "paused"}, catch-up ${s.catchUp}`);
  ctx.io.line(`  target: ${targetText(s)}`);
  ctx.io.line(`  message: ${s.message.length > 80 ? `${s.message.slice(0, 77)}...` : s.message}`);
  if (s.nextRuns.length === 0) ctx.io.line("  next runs: none");
  else ctx.io.line(`  next runs: ${s.nextRuns.join(", ")}`);
}
