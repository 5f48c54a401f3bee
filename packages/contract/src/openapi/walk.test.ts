// test-timeout: 900000
// The OpenAPI documents against the running platform: identity, compute,
// agents and the router, each its real main as a process (platform-stack).
// Every operation of every document is called, with a valid request where
// that is cheap and otherwise one that must fail, and every answer is checked
// against the document: its status listed, its content type named, its body
// (each SSE event's data) valid by the schema given for that status.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../../../platform/src/testing/platform-stack.ts";
import { DocumentWalker } from "./walker.ts";

const genDir = new URL("../../../../gen/openapi/", import.meta.url);
let stack: PlatformStack;
let identity: DocumentWalker;
let agents: DocumentWalker;
let router: DocumentWalker;

before(async () => {
  stack = await startPlatform();
  identity = new DocumentWalker("identity", new URL("identity.json", genDir), stack.endpoints.identity);
  agents = new DocumentWalker("agents", new URL("agents.json", genDir), stack.endpoints.agents);
  router = new DocumentWalker("router", new URL("router.json", genDir), stack.endpoints.router);
});

after(async () => {
  await stack?.stop();
});

const claims = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as Record<string, string>;
const key = () => ({ "idempotency-key": randomUUID() });
type Json = Record<string, unknown>;

test("every route of the three documents answers what its document says", async (t) => {
  // --- identity: the owner's day, then the members' and keys' routes ---
  const login = await identity.call("POST", "/v1/auth/login", { body: OWNER, expect: 200 });
  let pair = login.json as Json;
  const token = pair.access_token as string;
  const orgId = claims(token).org_id!;
  await identity.call("POST", "/v1/auth/login", { body: { ...OWNER, password: "wrong-password-1" }, expect: 401 });
  await identity.call("POST", "/v1/auth/login", { raw: { contentType: "text/plain", text: "x" }, expect: 415 });
  // identity refuses unknown fields, as its request schemas say (additionalProperties: false).
  await identity.call("POST", "/v1/auth/login", { body: { ...OWNER, remember: true }, expect: 400 });
  pair = (await identity.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token }, expect: 200 }))
    .json as Json;
  await identity.call("POST", "/v1/auth/refresh", { body: {}, expect: 400 });
  await identity.call("POST", "/v1/auth/logout", { body: { refresh_token: pair.refresh_token }, expect: 204 });
  const me = (await identity.call("GET", "/v1/users/me", { token, expect: 200 })).json as Json;
  await identity.call("GET", "/v1/users/me", { expect: 401 });
  await identity.call("PATCH", "/v1/users/me", { token, headers: key(), body: { name: "Owner" }, expect: 200 });
  // The documented Idempotency-Key header is required.
  await identity.call("PATCH", "/v1/users/me", { token, body: { name: "Owner" }, expect: 400 });
  await identity.call("GET", "/v1/users/me/orgs", { token, expect: 200 });
  const created = (
    await identity.call("POST", "/v1/users/me/api_keys", { token, headers: key(), body: { name: "walk" }, expect: 201 })
  ).json as Json;
  await identity.call("POST", "/v1/users/me/api_keys", { token, body: { name: "no key" }, expect: 400 });
  await identity.call("GET", "/v1/users/me/api_keys", { token, expect: 200 });
  await identity.call("GET", "/v1/users/me/api_keys", { token: created.raw_key as string, expect: 200 });
  await identity.call("POST", "/v1/users/me/api_keys/{id}/revoke", {
    token,
    headers: key(),
    path: { id: created.id as string },
    expect: 204,
  });
  await identity.call("GET", "/v1/orgs/{id}", { token, path: { id: orgId }, expect: 200 });
  await identity.call("GET", "/v1/orgs/{id}", { token, path: { id: randomUUID() }, expect: 404 });
  await identity.call("PATCH", "/v1/orgs/{id}", {
    token,
    headers: key(),
    path: { id: orgId },
    body: { name: "Walked Org" },
    expect: 200,
  });
  const other = (
    await identity.call("POST", "/v1/orgs", {
      token,
      headers: key(),
      body: { name: "Second", slug: `second-${Date.now()}` },
      expect: 201,
    })
  ).json as Json;
  await identity.call("POST", "/v1/auth/switch-org", {
    token,
    headers: key(),
    body: { org_id: other.id },
    expect: 200,
  });
  await identity.call("POST", "/v1/auth/signup", {
    body: { email: "nobody@example.com", password: "password-123456", name: "N", org_name: "N" },
    expect: 403,
  });
  const email = `member-${Date.now()}@example.com`;
  const invitation = (
    await identity.call("POST", "/v1/orgs/{org_id}/invitations", {
      token,
      headers: key(),
      path: { org_id: orgId },
      body: { email, role: "member" },
      expect: 201,
    })
  ).json as Json;
  await identity.call("GET", "/v1/orgs/{org_id}/invitations", { token, path: { org_id: orgId }, expect: 200 });
  await identity.call("POST", "/v1/invitations/accept", {
    body: { token: invitation.token, password: "member-password-1", name: "Member", email },
    expect: 200,
  });
  const second = (
    await identity.call("POST", "/v1/orgs/{org_id}/invitations", {
      token,
      headers: key(),
      path: { org_id: orgId },
      body: { email: `x-${email}`, role: "member" },
      expect: 201,
    })
  ).json as Json;
  await identity.call("POST", "/v1/orgs/{org_id}/invitations/{id}/revoke", {
    token,
    headers: key(),
    path: { org_id: orgId, id: (second.invitation as Json).id as string },
    expect: 204,
  });
  const members = (
    await identity.call("GET", "/v1/orgs/{org_id}/members", { token, path: { org_id: orgId }, expect: 200 })
  ).json as Array<Json>;
  const member = members.find((m) => m.email === email)!;
  await identity.call("PATCH", "/v1/orgs/{org_id}/members/{user_id}", {
    token,
    headers: key(),
    path: { org_id: orgId, user_id: member.user_id as string },
    body: { role: "owner" },
    expect: 200,
  });
  await identity.call("DELETE", "/v1/orgs/{org_id}/members/{user_id}", {
    token,
    headers: key(),
    path: { org_id: orgId, user_id: member.user_id as string },
    expect: 204,
  });
  const orgKey = (
    await identity.call("POST", "/v1/users/me/api_keys", {
      token,
      headers: key(),
      body: { name: "org", org: true },
      expect: 201,
    })
  ).json as Json;
  await identity.call("GET", "/v1/orgs/{org_id}/api_keys", { token, path: { org_id: orgId }, expect: 200 });
  await identity.call("POST", "/v1/orgs/{org_id}/api_keys/{id}/revoke", {
    token,
    headers: key(),
    path: { org_id: orgId, id: orgKey.id as string },
    expect: 204,
  });
  await identity.call("GET", "/v1/orgs/{org_id}/audit_events", {
    token,
    path: { org_id: orgId },
    query: { limit: "5" },
    expect: 200,
  });
  // Webhooks (issue 25): an endpoint whose host does not resolve (.invalid), an event for it, its log.
  const hook = (
    await identity.call("POST", "/v1/orgs/{org_id}/webhooks", {
      token,
      headers: key(),
      path: { org_id: orgId },
      body: { url: "https://hooks.invalid/walk", event_types: ["api_key.created"] },
      expect: 201,
    })
  ).json as Json;
  const hookPath = { org_id: orgId, id: (hook.webhook as Json).id as string };
  await identity.call("POST", "/v1/orgs/{org_id}/webhooks", {
    token,
    headers: key(),
    path: { org_id: orgId },
    body: { url: "not a url", event_types: ["api_key.created"] },
    expect: 400,
  });
  await identity.call("POST", "/v1/users/me/api_keys", {
    token,
    headers: key(),
    body: { name: "hooked" },
    expect: 201,
  });
  await identity.call("GET", "/v1/orgs/{org_id}/webhooks", { token, path: { org_id: orgId }, expect: 200 });
  await identity.call("GET", "/v1/orgs/{org_id}/webhooks/{id}", { token, path: hookPath, expect: 200 });
  await identity.call("PATCH", "/v1/orgs/{org_id}/webhooks/{id}", {
    token,
    headers: key(),
    path: hookPath,
    body: { description: "walked" },
    expect: 200,
  });
  await identity.call("POST", "/v1/orgs/{org_id}/webhooks/{id}/rotate-secret", {
    token,
    headers: key(),
    path: hookPath,
    expect: 200,
  });
  const hookLog = (
    await identity.call("GET", "/v1/orgs/{org_id}/webhooks/{id}/deliveries", { token, path: hookPath, expect: 200 })
  ).json as Json;
  await identity.call("POST", "/v1/orgs/{org_id}/webhooks/{id}/deliveries/{delivery_id}/redeliver", {
    token,
    headers: key(),
    path: { ...hookPath, delivery_id: ((hookLog.items as Json[])[0] as Json).id as string },
    expect: 202,
  });
  await identity.call("DELETE", "/v1/orgs/{org_id}/webhooks/{id}", {
    token,
    headers: key(),
    path: hookPath,
    expect: 204,
  });
  await identity.call("GET", "/.well-known/jwks.json", { expect: 200 });
  await identity.call("GET", "/.well-known/openid-configuration", { expect: 200 });

  // --- agents: an agent, a session, a chat with a tool call, its files ---
  const agent = (
    await agents.call("POST", "/v1/agents", {
      token,
      body: { name: "walker", slug: `walker-${Date.now()}`, model: "dev/echo" },
      expect: 201,
    })
  ).json as Json;
  await agents.call("POST", "/v1/agents", { token, body: { name: "no slug" }, expect: 400 });
  await agents.call("POST", "/v1/agents", { body: {}, expect: 401 });
  await agents.call("GET", "/v1/agents", { token, query: { limit: "5" }, expect: 200 });
  await agents.call("GET", "/v1/agents/{id}", { token, path: { id: agent.id as string }, expect: 200 });
  await agents.call("GET", "/v1/agents/{id}", { token, path: { id: "not-a-uuid" }, expect: 400 });
  await agents.call("PATCH", "/v1/agents/{id}", {
    token,
    path: { id: agent.id as string },
    body: { systemPrompt: "Be brief." },
    expect: 200,
  });
  const session = (await agents.call("POST", "/v1/sessions", { token, body: { agentId: agent.id }, expect: 201 }))
    .json as Json;
  const sessionId = session.id as string;
  await agents.call("POST", "/v1/sessions", { token, body: { agentId: randomUUID() }, expect: 404 });
  // Query parameters by their documented (JSON) names.
  const listed = await agents.call("GET", "/v1/sessions", {
    token,
    query: { agentId: agent.id as string },
    expect: 200,
  });
  assert.deepEqual(
    ((listed.json as Json).items as Json[]).map((s) => s.id),
    [sessionId],
  );
  await agents.call("GET", "/v1/agents/{agent_id}/sessions", {
    token,
    path: { agent_id: agent.id as string },
    expect: 200,
  });
  const chat = await agents.call("POST", "/v1/sessions/{id}/messages", {
    token,
    path: { id: sessionId },
    body: { messages: [{ role: "user", content: "run: echo walked" }] },
    expect: 200,
  });
  const types = chat.events!.map((e) => (e.data as Json).type);
  assert.ok(types.includes("tool_use") && types.includes("tool_result"), `a tool call: ${types}`);
  assert.equal(types.at(-1), "done");
  await agents.call("GET", "/v1/sessions/{id}/events", {
    token,
    path: { id: sessionId },
    headers: { "last-event-id": "1" },
    expect: 200,
    streamMs: 3000,
  });
  await agents.call("GET", "/v1/sessions/{id}", { token, path: { id: sessionId }, expect: 200 });

  // A tool whose policy is `ask`: the run pauses with requires_action until a decision.
  const asker = (
    await agents.call("POST", "/v1/agents", {
      token,
      body: { name: "asker", slug: `asker-${Date.now()}`, model: "dev/echo", toolPermissions: { bash: "ask" } },
      expect: 201,
    })
  ).json as Json;
  const asked = (await agents.call("POST", "/v1/sessions", { token, body: { agentId: asker.id }, expect: 201 }))
    .json as Json;
  const paused = await agents.call("POST", "/v1/sessions/{id}/messages", {
    token,
    path: { id: asked.id as string },
    body: { messages: [{ role: "user", content: "run: echo asked" }] },
    expect: 200,
  });
  const pause = paused.events!.at(-1)!.data as Json;
  assert.equal(pause.type, "requires_action", JSON.stringify(paused.events));
  const calls = (JSON.parse(pause.content as string) as { calls: Json[] }).calls;
  await agents.call("GET", "/v1/sessions/{id}", { token, path: { id: asked.id as string }, expect: 200 });
  const decided = await agents.call("POST", "/v1/sessions/{id}/tool-decisions", {
    token,
    path: { id: asked.id as string },
    body: { decisions: calls.map((c) => ({ toolUseId: c.toolUseId, decision: "deny", message: "not now" })) },
    expect: 200,
  });
  assert.equal((decided.json as Json).resumed, true);
  // The resumed run's events, from the seq the answer names, until its done.
  const resumed = await agents.call("GET", "/v1/sessions/{id}/events", {
    token,
    path: { id: asked.id as string },
    query: { after: String((decided.json as Json).after) },
    expect: 200,
    streamMs: 60_000,
  });
  assert.equal((resumed.events!.at(-1)!.data as Json).type, "done", JSON.stringify(resumed.events));
  await agents.call("POST", "/v1/sessions/{id}/cancel", { token, path: { id: sessionId }, expect: 200 });
  await agents.call("POST", "/v1/sessions/{id}/files:write", {
    token,
    path: { id: sessionId },
    body: { path: "walk/notes.txt", data: Buffer.from("walked\n").toString("base64") },
    expect: 200,
  });
  await agents.call("GET", "/v1/sessions/{id}/files", {
    token,
    path: { id: sessionId },
    query: { recursive: "true" },
    expect: 200,
  });
  const read = await agents.call("GET", "/v1/sessions/{id}/files:read", {
    token,
    path: { id: sessionId },
    query: { path: "walk/notes.txt" },
    expect: 200,
  });
  assert.equal(Buffer.from((read.json as Json).data as string, "base64").toString(), "walked\n");

  // --- usage and budgets (issue 20 item 6): the asker's session has model and tool calls ---
  const metered = await agents.call("GET", "/v1/sessions/{id}/usage", {
    token,
    path: { id: asked.id as string },
    expect: 200,
  });
  assert.ok((((metered.json as Json).usage as Json).modelCalls as number) >= 1, JSON.stringify(metered.json));
  await agents.call("GET", "/v1/usage", { token, query: { since: "2020-01-01T00:00:00Z" }, expect: 200 });
  await agents.call("GET", "/v1/usage", { token, query: { since: "yesterday" }, expect: 400 });
  await agents.call("PATCH", "/v1/sessions/{id}/budgets", {
    token,
    path: { id: asked.id as string },
    body: { maxTokens: 100000 },
    expect: 200,
  });

  // --- schedules (issue 25): created paused, so it never fires during the walk ---
  const agentPath = { agent_id: agent.id as string };
  const schedule = (
    await agents.call("POST", "/v1/agents/{agent_id}/schedules", {
      token,
      path: agentPath,
      body: { cron: "0 9 * * 1-5", timeZone: "Europe/Berlin", message: "standup", enabled: false },
      expect: 201,
    })
  ).json as Json;
  await agents.call("POST", "/v1/agents/{agent_id}/schedules", {
    token,
    path: agentPath,
    body: { cron: "0 9 * * 1-5", timeZone: "Mars/Olympus", message: "x" },
    expect: 400,
  });
  await agents.call("GET", "/v1/agents/{agent_id}/schedules", { token, path: agentPath, expect: 200 });
  const scheduleId = { id: schedule.id as string };
  await agents.call("PATCH", "/v1/schedules/{id}", { token, path: scheduleId, body: { enabled: true }, expect: 200 });
  const shown = await agents.call("GET", "/v1/schedules/{id}", {
    token,
    path: scheduleId,
    query: { nextRuns: "3" },
    expect: 200,
  });
  assert.equal(((shown.json as Json).nextRuns as string[]).length, 3);
  await agents.call("GET", "/v1/schedules/{id}/firings", { token, path: scheduleId, expect: 200 });
  await agents.call("DELETE", "/v1/schedules/{id}", { token, path: scheduleId, expect: 204 });

  // --- the router: a chat through the tenant's worker, and a refusal ---
  await router.call("POST", "/v1/sessions/{session_id}/invoke", {
    path: { session_id: sessionId },
    body: {},
    expect: 401,
  });
  const invoke = await router.call("POST", "/v1/sessions/{session_id}/invoke", {
    token,
    path: { session_id: sessionId },
    body: { messages: [{ role: "user", content: "hello router" }] },
    expect: 200,
  });
  assert.equal(invoke.events!.at(-1)!.event, "turn_done", JSON.stringify(invoke.events));

  // --- last: the calls that end what the others used ---
  await agents.call("DELETE", "/v1/sessions/{id}", { token, path: { id: sessionId }, expect: 204 });
  await agents.call("DELETE", "/v1/agents/{id}", { token, path: { id: agent.id as string }, expect: 204 });
  await identity.call("POST", "/v1/users/me/password", {
    token,
    headers: key(),
    body: { current_password: "not-the-password", new_password: "another-password-1" },
    expect: 401,
  });
  await identity.call("POST", "/v1/auth/revoke-all", { token, headers: key(), body: { user_id: me.id }, expect: 204 });

  // --- every operation not walked above: a request that must fail as documented ---
  for (const walker of [identity, agents, router]) {
    for (const op of walker.operations()) {
      if (walker.walked.has(op)) continue;
      const [verb, path] = op.split(" ") as [string, string];
      if (!path.startsWith("/v1/")) continue;
      const params = Object.fromEntries([...path.matchAll(/\{([^}]+)\}/g)].map((m) => [m[1]!, randomUUID()]));
      const body = verb === "GET" ? undefined : {};
      t.diagnostic(`${walker.name}: ${op} walked with refusals only`);
      // No credential: 401 on every route that needs one.
      await walker.call(verb, path, { path: params, body, expect: 401 });
      // The owner, but ids of nothing and an empty body.
      await walker.call(verb, path, { token, headers: key(), path: params, body, expect: [400, 404, 409] });
    }
    for (const p of ["/livez", "/healthz", "/readyz"]) await walker.call("GET", p, { expect: 200 });
    const served = await walker.call("GET", "/openapi.json", { expect: 200 });
    assert.deepEqual(served.json, walker.doc, `${walker.name} serves its committed document`);
    const missing = walker.operations().filter((op) => !walker.walked.has(op));
    assert.deepEqual(missing, [], `${walker.name}: operations not walked`);
  }
});
