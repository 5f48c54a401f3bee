import { isUuid } from "@platform/errors";
import { saveCredentials } from "./credentials.ts";
import { CliError, UsageError } from "./endpoints.ts";
import type { PlatformClient } from "./http.ts";
import type { Output } from "./output.ts";
import { budgetFlags } from "./usage.ts";

export type Flags = Record<string, string | string[] | boolean | undefined>;
/** What every command gets: its output and the client (made on first use: some commands need no endpoints). */
export type Context = { io: Output; client(): PlatformClient };

const str = (flags: Flags, name: string): string | undefined => {
  const v = flags[name];
  return typeof v === "string" ? v : undefined;
};
export const need = (flags: Flags, name: string): string => {
  const v = str(flags, name);
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
};

export type Agent = {
  id: string;
  name: string;
  slug: string;
  model: string;
  systemPrompt?: string;
  toolPermissions?: Record<string, string>;
};
export type Session = { id: string; agentId: string; status?: string; lastSeq?: string | number; createdAt?: string };
export type SessionEvent = {
  seq?: string | number;
  type: string;
  content?: string;
  toolUseId?: string;
  isError?: boolean;
};
type Page<T> = { items: T[]; next?: string | null };

/** `?limit=&after=` from the flags; a limit that is not a number is the user's mistake, not the server's. */
function pageQuery(flags: Flags, extra: Record<string, string> = {}): string {
  const query = new URLSearchParams(extra);
  const limit = str(flags, "limit");
  if (limit !== undefined) {
    if (!/^\d+$/.test(limit)) throw new UsageError("--limit must be a number from 1 to 100");
    query.set("limit", limit);
  }
  const after = str(flags, "after");
  if (after !== undefined) query.set("after", after);
  const text = query.toString();
  return text ? `?${text}` : "";
}

/** The page in --json; rows and a `more:` hint (on stderr, so stdout stays rows) for people. */
function printPage<T>(io: Output, page: Page<T>, what: string, row: (item: T) => string): void {
  if (io.json) {
    io.value({ items: page.items, next: page.next ?? null });
    return;
  }
  if (page.items.length === 0) io.err(`no ${what}`);
  for (const item of page.items) io.line(row(item));
  if (page.next) io.err(`(more: --after ${page.next})`);
}

export async function login(ctx: Context, flags: Flags, password: string): Promise<void> {
  const client = ctx.client();
  const email = need(flags, "email");
  const pair = await client.request<{ access_token: string; refresh_token: string }>(
    "POST",
    `${client.endpoints.identity}/v1/auth/login`,
    {
      auth: false,
      body: { email, password, x_device_label: "platform-cli" },
    },
  );
  saveCredentials(
    client.endpoints.identity,
    { email, accessToken: pair.access_token, refreshToken: pair.refresh_token },
    client.env,
  );
  if (ctx.io.json) ctx.io.value({ email, loggedIn: true });
  else ctx.io.line(`logged in as ${email}`);
}

export async function logout(ctx: Context): Promise<void> {
  const client = ctx.client();
  const creds = client.credentials;
  if (creds) {
    await client
      .request("POST", `${client.endpoints.identity}/v1/auth/logout`, {
        auth: false,
        body: { refresh_token: creds.refreshToken },
      })
      .catch(() => undefined);
  }
  saveCredentials(client.endpoints.identity, undefined, client.env);
  if (ctx.io.json) ctx.io.value({ loggedOut: true });
  else ctx.io.line("logged out");
}

export async function whoami(ctx: Context): Promise<void> {
  const client = ctx.client();
  const me = await client.request<{ id: string; email: string; name: string }>(
    "GET",
    `${client.endpoints.identity}/v1/users/me`,
  );
  if (ctx.io.json) ctx.io.value(me);
  else ctx.io.line(`${me.email} (${me.name}) ${me.id}`);
}

type ApiKey = {
  id: string;
  name: string;
  key_prefix: string;
  env: string;
  expires_at?: string;
  scopes?: string[];
  org?: boolean;
};

/**
 * Where the keys live: the caller's own (`/v1/users/me/api_keys`) or, with
 * --org, the organization's (`/v1/orgs/{org}/api_keys`, owners only), the org
 * being the one the stored login is in.
 */
function keysUrl(client: PlatformClient, flags: Flags): string {
  if (flags.org !== true) return `${client.endpoints.identity}/v1/users/me/api_keys`;
  const token = client.env.PLATFORM_API_KEY ? undefined : client.credentials?.accessToken;
  let org: string | undefined;
  try {
    org =
      token &&
      (JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString()) as { org_id?: string }).org_id;
  } catch {
    org = undefined;
  }
  if (!org) throw new CliError("organization keys need a login (platform login), not an API key", "no_org");
  return `${client.endpoints.identity}/v1/orgs/${encodeURIComponent(org)}/api_keys`;
}

export async function apiKeysList(ctx: Context, flags: Flags = {}): Promise<void> {
  const client = ctx.client();
  const keys = await client.request<ApiKey[]>("GET", keysUrl(client, flags));
  if (ctx.io.json) return ctx.io.value(keys);
  if (keys.length === 0) ctx.io.err(flags.org === true ? "no organization API keys" : "no API keys");
  for (const k of keys) {
    ctx.io.line(
      `${k.id}  ${k.key_prefix}…  ${k.env}  ${(k.scopes ?? []).join(",")}  ${k.name}${k.expires_at ? `  expires ${k.expires_at}` : ""}`,
    );
  }
}

export async function apiKeysCreate(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const body: Record<string, string | string[]> = { name: need(flags, "name") };
  if (str(flags, "env")) body.env = str(flags, "env")!;
  if (str(flags, "expires-at")) body.expires_at = str(flags, "expires-at")!;
  // `--scope read --scope sessions:run` and `--scope read,sessions:run` alike; identity checks the names.
  const scope = flags.scope;
  const scopes = (Array.isArray(scope) ? scope : [])
    .flatMap((s) => s.split(","))
    .map((s) => s.trim())
    .filter(Boolean);
  if (scopes.length > 0) body.scopes = scopes;
  // --org: owned by the organization (owners only); it outlives your membership.
  const org = flags.org === true;
  const key = await client.request<{ id: string; raw_key: string; env: string; scopes?: string[]; org?: boolean }>(
    "POST",
    `${client.endpoints.identity}/v1/users/me/api_keys`,
    { body: org ? { ...body, org: true } : body, idempotent: true },
  );
  if (ctx.io.json) return ctx.io.value({ ...key, org: key.org === true });
  // The raw key first, before anything else can fail: it is shown once.
  ctx.io.line(`key: ${key.raw_key}`);
  ctx.io.line(
    `id:  ${key.id} (${key.env}; ${(key.scopes ?? []).join(", ")}${key.org ? "; owned by the organization" : ""})`,
  );
  ctx.io.err("store the key now: it is shown once and cannot be retrieved again");
}

export async function apiKeysRevoke(ctx: Context, args: string[], flags: Flags = {}): Promise<void> {
  const client = ctx.client();
  const id = args[0]!;
  await client.request("POST", `${keysUrl(client, flags)}/${encodeURIComponent(id)}/revoke`, { idempotent: true });
  if (ctx.io.json) ctx.io.value({ revoked: id });
  else ctx.io.line(`revoked ${id}`);
}

export async function agentsList(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const page = await client.request<Page<Agent>>("GET", `${client.endpoints.agents}/v1/agents${pageQuery(flags)}`);
  printPage(ctx.io, page, "agents", (a) => `${a.id}  ${a.slug}  ${a.model}  ${a.name}`);
}

export async function agentsCreate(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const name = need(flags, "name");
  const agent = await client.request<Agent>("POST", `${client.endpoints.agents}/v1/agents`, {
    body: {
      name,
      slug: str(flags, "slug") ?? name.toLowerCase().replace(/[^a-z0-9]+/g, "-"),
      model: str(flags, "model") ?? "dev/echo",
      systemPrompt: str(flags, "system-prompt") ?? "",
      toolPermissions: toolPolicies(flags),
      budgets: budgetFlags(flags),
    },
  });
  if (ctx.io.json) ctx.io.value(agent);
  else ctx.io.line(`created agent ${agent.id} (${agent.slug}, ${agent.model})${policiesNote(agent)}`);
}

/** `--ask bash --ask write_file` or `--ask bash,write_file` (and `--allow`, on update): tool → policy. */
function toolPolicies(flags: Flags): Record<string, string> {
  const out: Record<string, string> = {};
  for (const policy of ["allow", "ask"] as const) {
    const values = flags[policy];
    for (const v of Array.isArray(values) ? values : typeof values === "string" ? [values] : [])
      for (const tool of v.split(",").map((t) => t.trim()))
        if (tool) {
          if (out[tool] && out[tool] !== policy) throw new UsageError(`--ask and --allow both name ${tool}`);
          out[tool] = policy;
        }
  }
  return out;
}

/** `; asks before: bash, write_file` when any tool is `ask`. */
function policiesNote(agent: Agent): string {
  const asked = Object.entries(agent.toolPermissions ?? {})
    .filter(([, p]) => p === "ask")
    .map(([t]) => t);
  return asked.length > 0 ? `; asks before: ${asked.join(", ")}` : "";
}

export async function agentsGet(ctx: Context, args: string[]): Promise<void> {
  const agent = await resolveAgent(ctx.client(), args[0]!);
  ctx.io.line(JSON.stringify(agent, null, ctx.io.json ? undefined : 2));
}

export async function agentsUpdate(ctx: Context, args: string[], flags: Flags): Promise<void> {
  const client = ctx.client();
  const body: Record<string, unknown> = {};
  for (const [flag, field] of [
    ["name", "name"],
    ["slug", "slug"],
    ["model", "model"],
    ["system-prompt", "systemPrompt"],
  ] as const) {
    const value = str(flags, flag);
    if (value !== undefined) body[field] = value;
  }
  const policies = toolPolicies(flags);
  if (Object.keys(policies).length > 0) body.toolPermissions = policies;
  const budgets = budgetFlags(flags);
  if (budgets) body.budgets = budgets;
  if (Object.keys(body).length === 0)
    throw new UsageError(
      "nothing to change: give --name, --slug, --model, --system-prompt, --ask, --allow or a --max-* budget",
    );
  const target = await resolveAgent(client, args[0]!);
  const agent = await client.request<Agent>("PATCH", `${client.endpoints.agents}/v1/agents/${target.id}`, { body });
  if (ctx.io.json) ctx.io.value(agent);
  else ctx.io.line(`updated agent ${agent.id} (${agent.slug}, ${agent.model})${policiesNote(agent)}`);
}

export async function agentsDelete(ctx: Context, args: string[]): Promise<void> {
  const client = ctx.client();
  const agent = await resolveAgent(client, args[0]!);
  await client.request("DELETE", `${client.endpoints.agents}/v1/agents/${agent.id}`);
  if (ctx.io.json) ctx.io.value({ deleted: agent.id });
  else ctx.io.line(`deleted agent ${agent.id} (${agent.slug}); its sessions stay readable`);
}

/** An agent by UUID or by slug. */
export async function resolveAgent(client: PlatformClient, idOrSlug: string): Promise<Agent> {
  if (isUuid(idOrSlug)) return client.request<Agent>("GET", `${client.endpoints.agents}/v1/agents/${idOrSlug}`);
  let after = "";
  for (;;) {
    const page = await client.request<Page<Agent>>(
      "GET",
      `${client.endpoints.agents}/v1/agents?limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`,
    );
    const hit = page.items.find((a) => a.slug === idOrSlug);
    if (hit) return hit;
    if (!page.next) throw new UsageError(`no agent with id or slug ${idOrSlug}`);
    after = page.next;
  }
}

export async function sessionsList(ctx: Context, flags: Flags): Promise<void> {
  const client = ctx.client();
  const agent = str(flags, "agent");
  // A UUID is used as it is: a deleted agent's sessions stay listable.
  const agentId = agent === undefined ? undefined : isUuid(agent) ? agent : (await resolveAgent(client, agent)).id;
  const page = await client.request<Page<Session>>(
    "GET",
    `${client.endpoints.agents}/v1/sessions${pageQuery(flags, agentId ? { agentId } : {})}`,
  );
  printPage(
    ctx.io,
    page,
    "sessions",
    (s) => `${s.id}  agent ${s.agentId}  ${s.status ?? ""}  ${s.lastSeq ?? 0} events  ${s.createdAt ?? ""}`,
  );
}

export async function createSession(
  client: PlatformClient,
  agentRef: string,
): Promise<{ session: Session; agent: Agent }> {
  const agent = await resolveAgent(client, agentRef);
  const session = await client.request<Session>("POST", `${client.endpoints.agents}/v1/sessions`, {
    body: { agentId: agent.id },
  });
  return { session, agent };
}

export async function sessionsCreate(ctx: Context, args: string[]): Promise<void> {
  const { session, agent } = await createSession(ctx.client(), args[0]!);
  if (ctx.io.json) ctx.io.value(session);
  else ctx.io.line(`created session ${session.id} (agent ${agent.slug})`);
}

export async function sessionsGet(ctx: Context, args: string[]): Promise<void> {
  const client = ctx.client();
  const res = await client.request<{ session: Session; events: SessionEvent[] }>(
    "GET",
    `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(args[0]!)}`,
  );
  if (ctx.io.json) return ctx.io.value(res);
  ctx.io.line(`session ${res.session.id}  agent ${res.session.agentId}  ${res.session.status ?? ""}`);
  for (const e of res.events) ctx.io.line(`  #${e.seq} ${e.type}${e.content ? `: ${e.content}` : ""}`);
}

export async function sessionsDelete(ctx: Context, args: string[]): Promise<void> {
  const client = ctx.client();
  const id = args[0]!;
  await client.request("DELETE", `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(id)}`);
  if (ctx.io.json) ctx.io.value({ deleted: id });
  else ctx.io.line(`deleted session ${id}`);
}
