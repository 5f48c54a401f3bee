// `platform webhooks ...`: the organization's webhook endpoints (issue 25):
// create (the signing secret is printed once), list, get, enable/disable,
// rm, the delivery log, redelivery and secret rotation.
import { isUuid } from "@platform/errors";
import type { Context, Flags } from "./commands.ts";
import { need } from "./commands.ts";
import { UsageError } from "./endpoints.ts";
import type { PlatformClient } from "./http.ts";
import type { CommandSpec } from "./spec.ts";
import { currentOrg } from "./teams.ts";

type Webhook = {
  id: string;
  url: string;
  event_types: string[];
  enabled?: boolean;
  description?: string;
  disabled_reason?: string;
  failure_streak?: number;
  previous_secret_expires_at?: string | null;
  created_at: string;
};
type Attempt = { number: number; started_at: string; status_code?: number; latency_ms?: number; error?: string };
type Delivery = {
  id: string;
  event_type: string;
  status: string;
  attempt_count?: number;
  next_attempt_at?: string | null;
  created_at: string;
  attempts: Attempt[];
};

const org = { type: "string", value: "org id", help: "the organization (default: the signed-in one)" } as const;
const idArg = { args: "<webhook id>", min: 1, max: 1 };

export const WEBHOOK_COMMANDS: CommandSpec[] = [
  {
    path: ["webhooks", "create"],
    summary: "an endpoint told of events by signed POSTs; prints its signing secret once",
    options: {
      url: { type: "string", value: "url", help: "where events are POSTed (http or https)", required: true },
      events: {
        type: "string",
        value: "a,b",
        help: "event types: session.idle, session.requires_action, run.failed, session.budget_reached, sandbox.failed, member.added, api_key.created",
        required: true,
      },
      description: { type: "string", value: "text", help: "a note for people" },
      disabled: { type: "boolean", help: "create it disabled" },
      org,
    },
  },
  { path: ["webhooks", "list"], summary: "the organization's webhook endpoints", isDefault: true, options: { org } },
  { path: ["webhooks", "get"], summary: "one endpoint", ...idArg, options: { org } },
  {
    path: ["webhooks", "enable"],
    summary: "deliver to it again (its failure streak starts over)",
    ...idArg,
    options: { org },
  },
  { path: ["webhooks", "disable"], summary: "stop delivering to it (events wait)", ...idArg, options: { org } },
  { path: ["webhooks", "rm"], summary: "delete an endpoint and its pending deliveries", ...idArg, options: { org } },
  {
    path: ["webhooks", "deliveries"],
    summary: "an endpoint's delivery log, newest first: event, status, attempts",
    ...idArg,
    options: { org, limit: { type: "string", value: "n", help: "deliveries per page, 1 to 100 (default 20)" } },
  },
  {
    path: ["webhooks", "redeliver"],
    summary: "send a delivery again now (same webhook-id and body)",
    args: "<webhook id> <delivery id>",
    min: 2,
    max: 2,
    options: { org },
  },
  {
    path: ["webhooks", "rotate-secret"],
    summary: "a new signing secret, printed once; the old one signs beside it for a day",
    ...idArg,
    options: { org },
  },
];

type Handler = (ctx: Context, args: string[], flags: Flags) => Promise<unknown>;

export const webhookHandlers: Record<string, Handler> = {
  "webhooks create": (ctx, _args, flags) => create(ctx, flags),
  "webhooks list": (ctx, _args, flags) => list(ctx, flags),
  "webhooks get": (ctx, args, flags) => get(ctx, args[0]!, flags),
  "webhooks enable": (ctx, args, flags) => setEnabled(ctx, args[0]!, flags, true),
  "webhooks disable": (ctx, args, flags) => setEnabled(ctx, args[0]!, flags, false),
  "webhooks rm": (ctx, args, flags) => remove(ctx, args[0]!, flags),
  "webhooks deliveries": (ctx, args, flags) => deliveries(ctx, args[0]!, flags),
  "webhooks redeliver": (ctx, args, flags) => redeliver(ctx, args[0]!, args[1]!, flags),
  "webhooks rotate-secret": (ctx, args, flags) => rotate(ctx, args[0]!, flags),
};

const base = (client: PlatformClient, flags: Flags) =>
  `${client.endpoints.identity}/v1/orgs/${encodeURIComponent(currentOrg(client, flags))}/webhooks`;

function hookId(id: string, what = "webhook"): string {
  if (!isUuid(id)) throw new UsageError(`the ${what} id must be a UUID (platform webhooks list)`);
  return id;
}

function line(w: Webhook): string {
  const state = w.enabled ? "enabled" : `disabled${w.disabled_reason ? ` (${w.disabled_reason})` : ""}`;
  return `${w.id}  ${w.url}  ${w.event_types.join(",")}  ${state}`;
}

async function create(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const events = need(flags, "events")
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  const r = await client.request<{ webhook: Webhook; secret: string }>("POST", base(client, flags), {
    body: {
      url: need(flags, "url"),
      event_types: events,
      enabled: flags.disabled !== true,
      description: typeof flags.description === "string" ? flags.description : "",
    },
    idempotent: true,
  });
  if (ctx.io.json) return ctx.io.value({ ...r.webhook, secret: r.secret });
  ctx.io.line(line(r.webhook));
  ctx.io.line(`signing secret (shown once, keep it): ${r.secret}`);
}

async function list(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const hooks = await client.request<Webhook[]>("GET", base(client, flags));
  if (ctx.io.json) return ctx.io.value(hooks);
  if (hooks.length === 0) ctx.io.err("no webhooks");
  for (const w of hooks) ctx.io.line(line(w));
}

async function get(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const w = await client.request<Webhook>("GET", `${base(client, flags)}/${hookId(id)}`);
  if (ctx.io.json) return ctx.io.value(w);
  ctx.io.line(line(w));
  if (w.failure_streak) ctx.io.line(`  failed attempts in a row: ${w.failure_streak}`);
  if (w.previous_secret_expires_at) ctx.io.line(`  previous secret signs until ${w.previous_secret_expires_at}`);
}

async function setEnabled(ctx: Context, id: string, flags: Flags, enabled: boolean): Promise<void> {
  const client = ctx.client();
  const w = await client.request<Webhook>("PATCH", `${base(client, flags)}/${hookId(id)}`, {
    body: { enabled },
    idempotent: true,
  });
  if (ctx.io.json) return ctx.io.value(w);
  ctx.io.line(`${enabled ? "enabled" : "disabled"} ${line(w)}`);
}

async function remove(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  await client.request("DELETE", `${base(client, flags)}/${hookId(id)}`, { idempotent: true });
  if (ctx.io.json) ctx.io.value({ deleted: id });
  else ctx.io.line(`deleted webhook ${id}`);
}

async function deliveries(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const limit = typeof flags.limit === "string" ? flags.limit : undefined;
  if (limit !== undefined && !/^\d+$/.test(limit)) throw new UsageError("--limit must be a number from 1 to 100");
  const page = await client.request<{ items: Delivery[]; next?: string | null }>(
    "GET",
    `${base(client, flags)}/${hookId(id)}/deliveries${limit ? `?limit=${limit}` : ""}`,
  );
  if (ctx.io.json) return ctx.io.value({ items: page.items, next: page.next ?? null });
  if (page.items.length === 0) ctx.io.err("no deliveries yet");
  for (const d of page.items) {
    const last = d.attempts.at(-1);
    const outcome = last
      ? last.status_code
        ? `HTTP ${last.status_code}`
        : (last.error ?? "no answer")
      : "not tried yet";
    const next = d.status === "pending" && d.next_attempt_at ? `, next ${d.next_attempt_at}` : "";
    ctx.io.line(`${d.id}  ${d.event_type}  ${d.status}  ${d.attempt_count ?? 0} attempt(s), last ${outcome}${next}`);
  }
}

async function redeliver(ctx: Context, id: string, deliveryId: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const d = await client.request<Delivery>(
    "POST",
    `${base(client, flags)}/${hookId(id)}/deliveries/${hookId(deliveryId, "delivery")}/redeliver`,
    { idempotent: true },
  );
  if (ctx.io.json) return ctx.io.value(d);
  ctx.io.line(`delivery ${d.id} queued again`);
}

async function rotate(ctx: Context, id: string, flags: Flags): Promise<void> {
  const client = ctx.client();
  const r = await client.request<{ webhook: Webhook; secret: string }>(
    "POST",
    `${base(client, flags)}/${hookId(id)}/rotate-secret`,
    { idempotent: true },
  );
  if (ctx.io.json) return ctx.io.value({ ...r.webhook, secret: r.secret });
  ctx.io.line(`new signing secret (shown once, keep it): ${r.secret}`);
  ctx.io.line(`the previous secret also signs until ${r.webhook.previous_secret_expires_at}`);
}
