import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import pino from "pino";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { type Caller, IdentityDouble } from "@platform/identity-client/testing";
import { createAgentsTestDatabase } from "../testing/database.ts";

// The everyday operations beyond create and get, on the real server: list
// sessions (of the org, of an agent), update and delete an agent, delete a
// session, over REST and over gRPC, scoped to the caller's org.

let service: AgentsServer;
let base: string;
/** The internal port (gRPC, Connect, gRPC-Web); `base` is the public REST/SSE one. */
let grpcBase: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    { runLeaseMs: 3000 },
  );
  const providers = new ProviderRegistry().register("dev", new DevModel());
  service = await createAgentsServer(config, pino({ level: "silent" }), {
    providers,
    database,
    pollMs: 200,
    internalTls: undefined,
  });
  ({ url: base, grpcUrl: grpcBase } = await service.listen());
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

async function call(
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  const isJson = res.headers.get("content-type")?.includes("json");
  return { status: res.status, text, json: (text && isJson ? JSON.parse(text) : undefined) as Json };
}

function assertError(res: { status: number; json: Json }, status: number, code: string) {
  assert.equal(res.status, status, JSON.stringify(res.json));
  assert.equal(res.json.error.code, code);
}

const grpc = () => ({
  agents: createClient(AgentService, grpcTransport(grpcBase)),
  sessions: createClient(SessionService, grpcTransport(grpcBase)),
});
const as = (caller: Caller) => ({ headers: { authorization: `Bearer ${caller.token}` } });

async function grpcRejects(promise: Promise<unknown>, code: Code) {
  await assert.rejects(promise, (err: unknown) => {
    assert.equal(ConnectError.from(err).code, code, String(err));
    return true;
  });
}

let slugs = 0;
async function agentOf(caller: Caller, model = "dev/echo"): Promise<Json> {
  const res = await call("POST", "/v1/agents", {
    token: caller.token,
    body: { name: "A", slug: `agent-${++slugs}`, model },
  });
  assert.equal(res.status, 201, res.text);
  return res.json;
}
async function sessionOf(caller: Caller, agentId: string): Promise<Json> {
  const res = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId } });
  assert.equal(res.status, 201, res.text);
  return res.json;
}

/** Every page of a list, following `next`. */
async function allPages(caller: Caller, path: string, limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let after = "";
  let pages = 0;
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const res = await call("GET", `${path}${sep}limit=${limit}${after ? `&after=${encodeURIComponent(after)}` : ""}`, {
      token: caller.token,
    });
    assert.equal(res.status, 200, res.text);
    pages++;
    ids.push(...res.json.items.map((s: Json) => s.id));
    if (res.json.next === null || res.json.next === undefined) return { ids, pages };
    after = res.json.next;
  }
}

describe("list sessions", () => {
  test("REST: newest first, paged by an opaque cursor, of the org or of one agent; nothing of another org", async () => {
    const caller = identity.caller();
    const other = identity.caller();
    const a = await agentOf(caller);
    const b = await agentOf(caller);
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await sessionOf(caller, i % 2 === 0 ? a.id : b.id)).id);
    await sessionOf(other, (await agentOf(other)).id);

    const org = await allPages(caller, "/v1/sessions", 2);
    assert.deepEqual(org.ids, made.slice().reverse());
    assert.equal(org.pages, 3);
    const ofA = await allPages(caller, `/v1/agents/${a.id}/sessions`, 2);
    assert.deepEqual(ofA.ids, [made[4], made[2], made[0]]);
    const ofB = await allPages(caller, `/v1/sessions?agentId=${b.id}`, 1);
    assert.deepEqual(ofB.ids, [made[3], made[1]]);

    const page = await call("GET", "/v1/sessions?limit=1", { token: caller.token });
    assert.deepEqual(Object.keys(page.json).sort(), ["items", "next"]);
    assert.deepEqual(Object.keys(page.json.items[0]).sort(), [
      "agentId",
      // The session's own budgets (issue 20, additive).
      "budgets",
      "createdAt",
      "id",
      "lastSeq",
      "sandboxId",
      "status",
      "updatedAt",
    ]);
    // Another org's agent: an empty page, as for an agent that does not exist.
    const foreign = await call("GET", `/v1/agents/${a.id}/sessions`, { token: other.token });
    assert.deepEqual(foreign.json.items, []);
  });

  test("REST: rows created while paging neither shift nor repeat; bad limit, cursor and agentId are 400", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await sessionOf(caller, agent.id)).id);
    const first = await call("GET", "/v1/sessions?limit=2", { token: caller.token });
    await sessionOf(caller, agent.id);
    const second = await call("GET", `/v1/sessions?limit=2&after=${encodeURIComponent(first.json.next)}`, {
      token: caller.token,
    });
    assert.deepEqual(
      [...first.json.items, ...second.json.items].map((s: Json) => s.id),
      made.slice().reverse(),
    );
    assert.equal(second.json.next, null);

    assertError(await call("GET", "/v1/sessions?limit=0", { token: caller.token }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/sessions?limit=101", { token: caller.token }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/sessions?after=nope", { token: caller.token }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/sessions?agentId=nope", { token: caller.token }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/sessions"), 401, "unauthenticated");
  });

  test("gRPC: the same pages", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const made = [(await sessionOf(caller, agent.id)).id, (await sessionOf(caller, agent.id)).id];
    const { sessions } = grpc();
    const one = await sessions.listSessions({ limit: 1, agentId: agent.id }, as(caller));
    assert.deepEqual(
      one.items.map((s) => s.id),
      [made[1]],
    );
    const two = await sessions.listSessions({ limit: 1, agentId: agent.id, after: one.next }, as(caller));
    assert.deepEqual(
      two.items.map((s) => s.id),
      [made[0]],
    );
    assert.equal(two.next, undefined);
    const foreign = await sessions.listSessions({ agentId: agent.id }, as(identity.caller()));
    assert.deepEqual(foreign.items, []);
  });
});

describe("update an agent", () => {
  test("REST PATCH: only the fields sent change; slug rules as on create (409 taken, 400 empty); 404 across orgs", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const taken = await agentOf(caller);
    const res = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { name: "Renamed", systemPrompt: "be brief" },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.name, "Renamed");
    assert.equal(res.json.systemPrompt, "be brief");
    assert.equal(res.json.slug, agent.slug);
    assert.equal(res.json.model, "dev/echo");
    assert.ok(Date.parse(res.json.updatedAt) >= Date.parse(agent.updatedAt));
    const model = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { model: "dev/other", slug: "fresh-slug" },
    });
    assert.equal(model.json.model, "dev/other");
    assert.equal(model.json.slug, "fresh-slug");
    assert.equal(model.json.name, "Renamed");
    assert.equal((await call("GET", `/v1/agents/${agent.id}`, { token: caller.token })).json.slug, "fresh-slug");

    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { slug: taken.slug } }),
      409,
      "already_exists",
    );
    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { slug: "" } }),
      400,
      "invalid_argument",
    );
    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { name: " " } }),
      400,
      "invalid_argument",
    );
    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { model: "x".repeat(300) } }),
      400,
      "invalid_argument",
    );
    assertError(
      await call("PATCH", "/v1/agents/not-a-uuid", { token: caller.token, body: { name: "x" } }),
      400,
      "invalid_argument",
    );
    const other = identity.caller();
    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: other.token, body: { name: "Stolen" } }),
      404,
      "not_found",
    );
    assert.equal((await call("GET", `/v1/agents/${agent.id}`, { token: caller.token })).json.name, "Renamed");
  });

  test("gRPC: optional fields; an empty update returns the agent unchanged; 404 across orgs", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const { agents } = grpc();
    const updated = await agents.updateAgent({ id: agent.id, name: "Over gRPC" }, as(caller));
    assert.equal(updated.agent?.name, "Over gRPC");
    assert.equal(updated.agent?.slug, agent.slug);
    const same = await agents.updateAgent({ id: agent.id }, as(caller));
    assert.equal(same.agent?.name, "Over gRPC");
    await grpcRejects(agents.updateAgent({ id: agent.id, name: "x" }, as(identity.caller())), Code.NotFound);
  });
});

describe("delete an agent", () => {
  test("REST DELETE: 204; gone from get and list; slug free again; its sessions stay readable and listed; 404 twice and across orgs", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const session = await sessionOf(caller, agent.id);
    const turn = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "hi" }] },
      headers: { accept: "text/event-stream" },
    });
    assert.equal(turn.status, 200);

    assertError(await call("DELETE", `/v1/agents/${agent.id}`, { token: identity.caller().token }), 404, "not_found");
    const res = await call("DELETE", `/v1/agents/${agent.id}`, { token: caller.token });
    assert.equal(res.status, 204);
    assert.equal(res.text, "");
    assertError(await call("GET", `/v1/agents/${agent.id}`, { token: caller.token }), 404, "not_found");
    assertError(await call("DELETE", `/v1/agents/${agent.id}`, { token: caller.token }), 404, "not_found");
    assertError(
      await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { name: "x" } }),
      404,
      "not_found",
    );
    const listed = await call("GET", "/v1/agents?limit=100", { token: caller.token });
    assert.ok(!listed.json.items.some((a: Json) => a.id === agent.id));
    const reuse = await call("POST", "/v1/agents", {
      token: caller.token,
      body: { name: "B", slug: agent.slug, model: "dev/echo" },
    });
    assert.equal(reuse.status, 201, reuse.text);

    const read = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(read.status, 200);
    assert.ok(read.json.events.some((e: Json) => e.type === "done"));
    assert.deepEqual((await allPages(caller, `/v1/agents/${agent.id}/sessions`, 10)).ids, [session.id]);
    assertError(
      await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: agent.id } }),
      404,
      "not_found",
    );
    const send = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "again" }] },
    });
    assertError(send, 404, "not_found");
  });

  test("gRPC: delete, then NOT_FOUND", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const { agents } = grpc();
    await grpcRejects(agents.deleteAgent({ id: agent.id }, as(identity.caller())), Code.NotFound);
    await agents.deleteAgent({ id: agent.id }, as(caller));
    await grpcRejects(agents.getAgent({ id: agent.id }, as(caller)), Code.NotFound);
    await grpcRejects(agents.deleteAgent({ id: agent.id }, as(caller)), Code.NotFound);
  });
});

describe("delete a session", () => {
  test("REST DELETE: its sandbox is destroyed through compute, the session and its log are gone; 404 across orgs and twice", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const session = await sessionOf(caller, agent.id);
    const turn = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "run: echo hi" }] },
      headers: { accept: "text/event-stream" },
    });
    assert.match(turn.text, /tool_result/);
    const { json } = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    const sandboxId = json.session.sandboxId as string;
    assert.ok(sandboxId);

    assertError(
      await call("DELETE", `/v1/sessions/${session.id}`, { token: identity.caller().token }),
      404,
      "not_found",
    );
    assert.ok(!compute.destroyCalls.includes(sandboxId));
    const res = await call("DELETE", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(res.status, 204, res.text);
    assert.ok(compute.destroyCalls.includes(sandboxId), "DestroySandbox was called for the session's sandbox");
    assertError(await call("GET", `/v1/sessions/${session.id}`, { token: caller.token }), 404, "not_found");
    assertError(await call("DELETE", `/v1/sessions/${session.id}`, { token: caller.token }), 404, "not_found");
    assert.deepEqual((await allPages(caller, "/v1/sessions", 10)).ids, []);
    const count = await database.db
      .selectFrom("session_events")
      .select(database.db.fn.countAll().as("n"))
      .where("session_id", "=", session.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(count.n), 0, "the log went with the session");
  });

  test("a run in progress is cancelled first: its stream ends with the cancel error, then the session is gone", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const session = await sessionOf(caller, agent.id);
    const stream = fetch(`${base}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${caller.token}`,
        "content-type": "application/json",
        accept: "text/event-stream",
      },
      body: JSON.stringify({ messages: [{ role: "user", content: "run: hang" }] }),
    });
    const res = await stream;
    const body = res.text();
    // The run is in its tool call once the session has a sandbox.
    for (let i = 0; i < 100; i++) {
      const s = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
      if (s.json.session.sandboxId && s.json.session.status === "running") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const started = Date.now();
    const del = await call("DELETE", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(del.status, 204, del.text);
    assert.ok(Date.now() - started < 2500, "the delete did not wait for the lease to lapse");
    assert.match(await body, /"type":"error","content":"the run was cancelled"/);
    assertError(await call("GET", `/v1/sessions/${session.id}`, { token: caller.token }), 404, "not_found");
  });

  test("gRPC: delete, then NOT_FOUND; compute down → UNAVAILABLE with the session intact", async () => {
    const caller = identity.caller();
    const agent = await agentOf(caller);
    const { sessions } = grpc();
    const plain = await sessionOf(caller, agent.id);
    await grpcRejects(sessions.deleteSession({ id: plain.id }, as(identity.caller())), Code.NotFound);
    await sessions.deleteSession({ id: plain.id }, as(caller));
    await grpcRejects(sessions.getSession({ id: plain.id }, as(caller)), Code.NotFound);

    const withSandbox = await sessionOf(caller, agent.id);
    await call("POST", `/v1/sessions/${withSandbox.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "run: echo hi" }] },
      headers: { accept: "text/event-stream" },
    });
    await compute.stop();
    try {
      await grpcRejects(sessions.deleteSession({ id: withSandbox.id }, as(caller)), Code.Unavailable);
      assert.equal((await sessions.getSession({ id: withSandbox.id }, as(caller))).session?.id, withSandbox.id);
    } finally {
      await compute.start();
    }
  });
});
