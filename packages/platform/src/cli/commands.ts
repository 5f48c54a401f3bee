import { saveCredentials } from "./credentials.ts";
import { UsageError } from "./endpoints.ts";
import { ApiError, type PlatformClient } from "./http.ts";
import { readSse, unescapeChunk } from "./sse.ts";

/** Where a command writes; tests pass their own. */
export type Output = { line(text: string): void; write(text: string): void; err(text: string): void };

type Flags = Record<string, string | boolean | undefined>;

const str = (flags: Flags, name: string): string | undefined => {
  const v = flags[name];
  return typeof v === "string" ? v : undefined;
};
const need = (flags: Flags, name: string): string => {
  const v = str(flags, name);
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
};

type Agent = { id: string; name: string; slug: string; model: string; systemPrompt?: string };
type Session = { id: string; agentId: string; status?: string; lastSeq?: string | number };
type SessionEvent = { seq?: string | number; type: string; content?: string; toolUseId?: string; isError?: boolean };

export async function login(client: PlatformClient, flags: Flags, io: Output, password: string): Promise<void> {
  const email = need(flags, "email");
  const pair = await client.request<{ access_token: string; refresh_token: string }>(
    "POST",
    `${client.endpoints.identity}/v1/auth/login`,
    { auth: false, body: { email, password, x_device_label: "platform-cli" } },
  );
  saveCredentials(client.endpoints.identity, { email, accessToken: pair.access_token, refreshToken: pair.refresh_token }, client.env);
  io.line(`logged in as ${email}`);
}

export async function logout(client: PlatformClient, io: Output): Promise<void> {
  const creds = client.credentials;
  if (creds) {
    await client
      .request("POST", `${client.endpoints.identity}/v1/auth/logout`, { auth: false, body: { refresh_token: creds.refreshToken } })
      .catch(() => undefined);
  }
  saveCredentials(client.endpoints.identity, undefined, client.env);
  io.line("logged out");
}

export async function whoami(client: PlatformClient, io: Output): Promise<void> {
  const me = await client.request<{ id: string; email: string; name: string }>("GET", `${client.endpoints.identity}/v1/users/me`);
  io.line(`${me.email} (${me.name}) ${me.id}`);
}

export async function apiKeys(client: PlatformClient, action: string | undefined, args: string[], flags: Flags, io: Output) {
  const base = `${client.endpoints.identity}/v1/users/me/api_keys`;
  switch (action ?? "list") {
    case "list": {
      const keys = await client.request<Array<{ id: string; name: string; key_prefix: string; env: string; expires_at?: string }>>("GET", base);
      if (keys.length === 0) io.line("no API keys");
      for (const k of keys) io.line(`${k.id}  ${k.key_prefix}…  ${k.env}  ${k.name}${k.expires_at ? `  expires ${k.expires_at}` : ""}`);
      return;
    }
    case "create": {
      const body: Record<string, string> = { name: need(flags, "name") };
      if (str(flags, "env")) body.env = str(flags, "env")!;
      if (str(flags, "expires-at")) body.expires_at = str(flags, "expires-at")!;
      const key = await client.request<{ id: string; raw_key: string; env: string }>("POST", base, { body, idempotent: true });
      io.line(`created API key ${key.id} (${key.env})`);
      io.line(`key: ${key.raw_key}`);
      io.line("store it now: it is shown once and cannot be retrieved again");
      return;
    }
    case "revoke": {
      const id = args[0] ?? need(flags, "id");
      await client.request("POST", `${base}/${encodeURIComponent(id)}/revoke`, { idempotent: true });
      io.line(`revoked ${id}`);
      return;
    }
    default:
      throw new UsageError(`unknown api-keys action ${action}: list, create, revoke`);
  }
}

export async function agents(client: PlatformClient, action: string | undefined, args: string[], flags: Flags, io: Output) {
  const base = `${client.endpoints.agents}/v1/agents`;
  switch (action ?? "list") {
    case "list": {
      const limit = str(flags, "limit");
      const page = await client.request<{ items: Agent[]; next?: string | null }>("GET", `${base}${limit ? `?limit=${limit}` : ""}`);
      if (page.items.length === 0) io.line("no agents");
      for (const a of page.items) io.line(`${a.id}  ${a.slug}  ${a.model}  ${a.name}`);
      if (page.next) io.line(`(more: --after ${page.next})`);
      return;
    }
    case "create": {
      const agent = await client.request<Agent>("POST", base, {
        body: {
          name: need(flags, "name"),
          slug: str(flags, "slug") ?? need(flags, "name").toLowerCase().replace(/[^a-z0-9]+/g, "-"),
          model: str(flags, "model") ?? "dev/echo",
          systemPrompt: str(flags, "system-prompt") ?? "",
        },
      });
      io.line(`created agent ${agent.id} (${agent.slug}, ${agent.model})`);
      return;
    }
    case "get": {
      const agent = await resolveAgent(client, args[0] ?? need(flags, "id"));
      io.line(JSON.stringify(agent, null, 2));
      return;
    }
    default:
      throw new UsageError(`unknown agents action ${action}: list, create, get`);
  }
}

/** An agent by UUID or by slug. */
async function resolveAgent(client: PlatformClient, idOrSlug: string): Promise<Agent> {
  if (/^[0-9a-f-]{36}$/i.test(idOrSlug)) return client.request<Agent>("GET", `${client.endpoints.agents}/v1/agents/${idOrSlug}`);
  let after = "";
  for (;;) {
    const page = await client.request<{ items: Agent[]; next?: string | null }>(
      "GET",
      `${client.endpoints.agents}/v1/agents?limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`,
    );
    const hit = page.items.find((a) => a.slug === idOrSlug);
    if (hit) return hit;
    if (!page.next) throw new UsageError(`no agent with id or slug ${idOrSlug}`);
    after = page.next;
  }
}

export async function sessions(client: PlatformClient, action: string | undefined, args: string[], flags: Flags, io: Output) {
  switch (action) {
    case "create": {
      const agent = await resolveAgent(client, args[0] ?? need(flags, "agent"));
      const session = await client.request<Session>("POST", `${client.endpoints.agents}/v1/sessions`, { body: { agentId: agent.id } });
      io.line(`created session ${session.id} (agent ${agent.slug})`);
      return;
    }
    case "get": {
      const id = args[0] ?? need(flags, "id");
      const res = await client.request<{ session: Session; events: SessionEvent[] }>("GET", `${client.endpoints.agents}/v1/sessions/${id}`);
      io.line(`session ${res.session.id}  agent ${res.session.agentId}  ${res.session.status ?? ""}`);
      for (const e of res.events) io.line(`  #${e.seq} ${e.type}${e.content ? `: ${e.content}` : ""}`);
      return;
    }
    default:
      throw new UsageError(`unknown sessions action ${action}: create, get`);
  }
}

/**
 * One chat turn: the reply streams through the runtime router (text), while
 * the session's event stream on the agents service shows tool calls and their
 * results as they happen (the router's event set has text only).
 */
export async function chatTurn(client: PlatformClient, sessionId: string, message: string, io: Output): Promise<void> {
  const session = await client.request<{ session: Session }>("GET", `${client.endpoints.agents}/v1/sessions/${sessionId}`);
  let seen = Number(session.session.lastSeq ?? 0);
  let done = false;
  const follow = (async () => {
    while (!done) {
      try {
        const res = await client.send("GET", `${client.endpoints.agents}/v1/sessions/${sessionId}/events?after=${seen}`, {
          headers: { accept: "text/event-stream" },
        });
        for await (const ev of readSse(res)) {
          if (done) break;
          if (ev.id) seen = Math.max(seen, Number(ev.id));
          const e = JSON.parse(ev.data) as SessionEvent;
          if (e.type === "tool_use") io.err(`\n⚙ ${e.content ?? ""}`);
          else if (e.type === "tool_result") io.err(`\n${e.isError ? "✗" : "↳"} ${(e.content ?? "").trimEnd()}`);
        }
      } catch {
        // The run may not have started yet; look again shortly.
      }
      if (!done) await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    const res = await client.send("POST", `${client.endpoints.router}/v1/sessions/${sessionId}/invoke`, {
      body: { messages: [{ role: "user", content: message }] },
      headers: { accept: "text/event-stream" },
    });
    for await (const ev of readSse(res)) {
      if (ev.event === "turn_done") break;
      if (ev.event === "error") throw new ApiError(200, "stream_error", (JSON.parse(ev.data) as { message: string }).message);
      io.write(unescapeChunk(ev.data));
    }
    io.write("\n");
  } finally {
    done = true;
    await Promise.race([follow, new Promise((r) => setTimeout(r, 200))]);
  }
}
