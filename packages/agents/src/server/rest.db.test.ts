import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { acceptedHeaders, looseHeaderVariants, rawRequest } from "@platform/credentials/testing";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import pino from "pino";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

// The agents service over HTTP as users see it: REST paths, statuses, the
// error envelope, SSE framing and headers, health endpoints.

let service: AgentsServer;
let base: string;
/** The internal port (gRPC, Connect, gRPC-Web); `base` is the public REST/SSE one. */
let grpcBase: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const scripted = new ScriptedModel();

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig({ identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() });
  const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
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
  opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined || opts.raw !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    text,
    json: (text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined) as Json,
  };
}

function assertError(res: { status: number; json: Json }, status: number, code: string) {
  assert.equal(res.status, status, JSON.stringify(res.json));
  assert.equal(res.json.error.code, code);
  assert.equal(typeof res.json.error.message, "string");
}

type Frame = { id?: string; data: Json };
function parseSse(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((l) => l.startsWith("data:")))
    .map((block) => {
      const lines = block.split("\n");
      const id = lines
        .find((l) => l.startsWith("id:"))
        ?.slice(3)
        .trim();
      const data = lines
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trim())
        .join("\n");
      return { id, data: JSON.parse(data) };
    });
}

async function agentAndSession(model = "dev/echo") {
  const caller = identity.caller();
  const agent = await call("POST", "/v1/agents", {
    token: caller.token,
    body: { name: "A", slug: `a-${Math.random()}`, model },
  });
  const session = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: agent.json.id } });
  return { caller, agent: agent.json, session: session.json };
}

describe("health", () => {
  test("/livez and /healthz are 200 without a token; /readyz follows identity", async () => {
    assert.equal((await fetch(`${base}/livez`)).status, 200);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    await identity.stop();
    try {
      assert.equal((await fetch(`${base}/readyz`)).status, 503);
      assert.equal((await fetch(`${base}/livez`)).status, 200);
    } finally {
      // The double comes back on a new port; point nothing else at it.
      await identity.start();
    }
  });
});

describe("REST: agents", () => {
  test("no token or an unknown one → 401 with the agents envelope", async () => {
    assertError(await call("GET", "/v1/agents"), 401, "unauthenticated");
    assertError(await call("GET", "/v1/agents", { token: "wrong" }), 401, "unauthenticated");
    assertError(
      await call("POST", "/v1/agents", { headers: { authorization: "Basic abc" }, body: {} }),
      401,
      "unauthenticated",
    );
  });

  test("only exactly `Bearer <token>`: every loose variant of a genuine token is 401 without asking identity", async () => {
    const { token } = identity.caller();
    for (const authorization of acceptedHeaders(token)) {
      const r = await rawRequest(base, { method: "GET", path: "/v1/agents", authorization });
      assert.equal(r.status, 200, `${authorization.slice(0, 8)}: ${r.body.slice(0, 200)}`);
    }
    for (const v of looseHeaderVariants(token)) {
      const calls = identity.verifyCalls;
      const r = await rawRequest(base, { method: "GET", path: "/v1/agents", authorization: v.value });
      const what = `${v.what} → ${r.status} ${r.body.slice(0, 120)}`;
      if (v.http === "same") {
        assert.equal(r.status, 200, what);
        continue;
      }
      if (v.http === "refused-by-http") assert.equal(r.status, 400, what);
      else assertError({ status: r.status, json: JSON.parse(r.body) }, 401, "unauthenticated");
      assert.equal(identity.verifyCalls, calls, `${what}: reached identity`);
    }
  });

  test("create → 201 with camelCase fields; get → 200; 409 for a taken slug", async () => {
    const { token } = identity.caller();
    const res = await call("POST", "/v1/agents", {
      token,
      body: { name: "Coder", slug: "coder", model: "dev/echo", systemPrompt: "You code." },
    });
    assert.equal(res.status, 201);
    assert.deepEqual(Object.keys(res.json).sort(), [
      "budgets",
      "clientTools",
      "createdAt",
      "id",
      "image",
      "mcpServers",
      "model",
      "name",
      "networkPolicy",
      "slug",
      "systemPrompt",
      "toolPermissions",
      "updatedAt",
    ]);
    assert.equal(res.json.systemPrompt, "You code.");
    assert.deepEqual(res.json.toolPermissions, {}, "every tool allowed, as before the field existed");
    assert.deepEqual(res.json.clientTools, [], "no client tools unless declared");
    assert.deepEqual(res.json.mcpServers, [], "no MCP servers unless declared");
    assert.ok(!Number.isNaN(Date.parse(res.json.createdAt)));
    const got = await call("GET", `/v1/agents/${res.json.id}`, { token });
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, res.json);
    assertError(
      await call("POST", "/v1/agents", { token, body: { name: "Other", slug: "coder", model: "dev/echo" } }),
      409,
      "already_exists",
    );
  });

  test("400 for malformed JSON and missing fields; 400 for a malformed id; 404 for another org's agent", async () => {
    const a = identity.caller();
    const b = identity.caller();
    assertError(await call("POST", "/v1/agents", { token: a.token, raw: "{not json" }), 400, "invalid_argument");
    assertError(
      await call("POST", "/v1/agents", { token: a.token, body: { name: "x", model: "dev/echo" } }),
      400,
      "invalid_argument",
    );
    assertError(await call("POST", "/v1/agents", { token: a.token, body: {} }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/agents/not-a-uuid", { token: a.token }), 400, "invalid_argument");
    const created = await call("POST", "/v1/agents", {
      token: a.token,
      body: { name: "x", slug: "x", model: "dev/echo" },
    });
    assertError(await call("GET", `/v1/agents/${created.json.id}`, { token: b.token }), 404, "not_found");
    assertError(
      await call("GET", "/v1/agents/00000000-0000-4000-8000-000000000000", { token: a.token }),
      404,
      "not_found",
    );
  });

  test("list: items and next; next is null on the last page; limit outside 1..100 → 400", async () => {
    const { token } = identity.caller();
    for (const slug of ["one", "two", "three"])
      await call("POST", "/v1/agents", { token, body: { name: slug, slug, model: "dev/echo" } });
    const page1 = await call("GET", "/v1/agents?limit=2", { token });
    assert.equal(page1.status, 200);
    assert.deepEqual(
      page1.json.items.map((a: Json) => a.slug),
      ["three", "two"],
    );
    assert.equal(typeof page1.json.next, "string");
    const page2 = await call("GET", `/v1/agents?limit=2&after=${encodeURIComponent(page1.json.next)}`, { token });
    assert.deepEqual(
      page2.json.items.map((a: Json) => a.slug),
      ["one"],
    );
    assert.equal(page2.json.next, null, "next is null on the last page");
    for (const bad of ["0", "101", "-1", "abc", "1.5"])
      assertError(await call("GET", `/v1/agents?limit=${bad}`, { token }), 400, "invalid_argument");
    assertError(await call("GET", "/v1/agents?after=bogus", { token }), 400, "invalid_argument");
    const empty = await call("GET", "/v1/agents", { token: identity.caller().token });
    assert.deepEqual(empty.json.items, []);
  });
});

describe("REST: sessions and streams", () => {
  test("create session → 201; get → {session, events}; 400 bad agentId; 404 another org's agent", async () => {
    const { caller, agent, session } = await agentAndSession();
    assert.equal(session.agentId, agent.id);
    assert.equal(session.status, "idle");
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.status, 200);
    assert.equal(got.json.session.id, session.id);
    assert.deepEqual(got.json.events, []);
    assert.equal(got.json.session.lastSeq, 0);
    assertError(
      await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: "nope" } }),
      400,
      "invalid_argument",
    );
    assertError(await call("POST", "/v1/sessions", { token: caller.token, body: {} }), 400, "invalid_argument");
    const other = identity.caller();
    assertError(
      await call("POST", "/v1/sessions", { token: other.token, body: { agentId: agent.id } }),
      404,
      "not_found",
    );
    assertError(await call("GET", `/v1/sessions/${session.id}`, { token: other.token }), 404, "not_found");
  });

  test("send messages streams SSE with the spec's headers, id = seq, zero fields omitted, closing after done", async () => {
    const { caller, session } = await agentAndSession();
    const res = await fetch(`${base}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${caller.token}`,
        "content-type": "application/json",
        accept: "text/event-stream",
      },
      body: JSON.stringify({ messages: [{ role: "user", content: "hello streaming world" }] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.equal(res.headers.get("cache-control"), "no-cache");
    assert.equal(res.headers.get("x-accel-buffering"), "no");
    const frames = parseSse(await res.text());
    assert.equal(frames.at(-1)?.data.type, "done");
    const text = frames.filter((f) => f.data.type === "text");
    assert.equal(text.map((f) => f.data.content).join(""), "echo: hello streaming world");
    for (const f of text) {
      assert.equal(f.data.tokensIn, undefined, "zero tokens omitted");
      assert.equal(f.data.toolUseId, undefined, "empty toolUseId omitted");
      assert.equal(f.data.isError, undefined);
    }
    assert.deepEqual(
      frames.map((f) => Number(f.id)),
      frames.map((_, i) => i + 2),
      "ids are the log's seqs after the user message (seq 1)",
    );
    const done = frames.at(-1)!.data;
    assert.equal(done.tokensIn, 3);
    assert.equal(done.tokensOut, 4);
    assert.equal(done.content, undefined);
    const log = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.deepEqual(
      log.json.events.map((e: Json) => e.type),
      ["user", ...frames.map((f) => f.data.type)],
    );
    assert.equal(log.json.events[0].seq, 1);
    assert.equal(log.json.session.lastSeq, frames.length + 1);
  });

  test("a tool round over SSE: tool_use and tool_result with toolUseId", async () => {
    const { caller, session } = await agentAndSession();
    const res = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "run: echo from the sandbox" }] },
      headers: { accept: "text/event-stream" },
    });
    const frames = parseSse(res.text);
    const use = frames.find((f) => f.data.type === "tool_use")!.data;
    const result = frames.find((f) => f.data.type === "tool_result")!.data;
    assert.ok(use.toolUseId);
    assert.equal(result.toolUseId, use.toolUseId);
    assert.deepEqual(JSON.parse(result.content), { exitCode: 0, stdout: "from the sandbox\n" });
    assert.equal(frames.at(-1)?.data.type, "done");
  });

  test("bad message bodies → 400 before any stream", async () => {
    const { caller, session } = await agentAndSession();
    const post = (raw: string) => call("POST", `/v1/sessions/${session.id}/messages`, { token: caller.token, raw });
    assertError(await post("{oops"), 400, "invalid_argument");
    assertError(await post("{}"), 400, "invalid_argument");
    assertError(await post('{"messages":[]}'), 400, "invalid_argument");
    assertError(await post('{"messages":[{"role":"robot","content":"x"}]}'), 400, "invalid_argument");
    assertError(await post('{"messages":[{"role":"tool","content":"x"}]}'), 400, "invalid_argument");
    assertError(
      await call("POST", "/v1/sessions/zzz/messages", {
        token: caller.token,
        raw: '{"messages":[{"role":"user","content":"x"}]}',
      }),
      400,
      "invalid_argument",
    );
  });

  test("an unreachable model → 503 unavailable before the stream; a busy session → 409", async () => {
    const { caller, session } = await agentAndSession("scripted/x");
    scripted.push("unreachable");
    const body = { messages: [{ role: "user", content: "hi" }] };
    assertError(
      await call("POST", `/v1/sessions/${session.id}/messages`, { token: caller.token, body }),
      503,
      "unavailable",
    );

    const hold = gate();
    scripted.push([
      { type: "text", text: "working" },
      { type: "wait", until: hold.promise },
      { type: "text", text: " done" },
    ]);
    const first = await fetch(`${base}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${caller.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(first.status, 200);
    const reader = first.body!.getReader();
    const firstChunk = new TextDecoder().decode((await reader.read()).value);
    assert.match(firstChunk, /working/);
    const busy = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { ...body, mode: "reject" },
    });
    assertError(busy, 409, "aborted");
    assert.match(busy.json.error.message, /active run/);
    hold.open();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    assert.match(rest, /"type":"done"/);
  });

  test("rejoin with Last-Event-ID or ?after=, and cancel", async () => {
    const { caller, session } = await agentAndSession("scripted/x");
    const hold = gate();
    scripted.push([
      { type: "text", text: "a" },
      { type: "text", text: "b" },
      { type: "wait", until: hold.promise },
      { type: "text", text: "c" },
    ]);
    const abort = new AbortController();
    const first = await fetch(`${base}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${caller.token}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "go" }] }),
      signal: abort.signal,
    });
    const reader = first.body!.getReader();
    let seen = "";
    while (!seen.includes('"b"')) seen += new TextDecoder().decode((await reader.read()).value);
    abort.abort(); // the client goes away mid-run
    const replay = await fetch(`${base}/v1/sessions/${session.id}/events`, {
      headers: { authorization: `Bearer ${caller.token}`, "last-event-id": "2" },
    });
    assert.equal(replay.status, 200);
    assert.match(replay.headers.get("content-type") ?? "", /^text\/event-stream/);
    const replayReader = replay.body!.getReader();
    let missed = "";
    while (!missed.includes('"b"')) missed += new TextDecoder().decode((await replayReader.read()).value);
    assert.match(missed, /^id: 3\n/m, "starts after Last-Event-ID");
    const cancelled = await call("POST", `/v1/sessions/${session.id}/cancel`, { token: caller.token });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.json.cancelled, true);
    let tail = "";
    for (let r = await replayReader.read(); !r.done; r = await replayReader.read())
      tail += new TextDecoder().decode(r.value);
    const frames = parseSse(missed + tail);
    assert.equal(frames.at(-1)?.data.type, "error");
    hold.open();
    const again = parseSse(
      (await call("GET", `/v1/sessions/${session.id}/events?after=1`, { token: caller.token })).text,
    );
    assert.deepEqual(
      again.map((f) => f.data.type),
      ["text", "text", "error"],
      "a finished run replays to its terminal event and closes",
    );
    const idle = await call("POST", `/v1/sessions/${session.id}/cancel`, { token: caller.token });
    assert.equal(idle.json.cancelled ?? false, false);
  });
});

describe("gRPC", () => {
  test("the same RPCs over gRPC (the runtime's tenant workers): bearer required, SendMessages streams", async () => {
    const client = createClient(SessionService, grpcTransport(grpcBase));
    const { caller, session } = await agentAndSession();
    await assert.rejects(
      client.getSession({ id: session.id }),
      (err: unknown) => ConnectError.from(err).code === Code.Unauthenticated,
    );
    const headers = { authorization: `Bearer ${caller.token}` };
    const types: string[] = [];
    for await (const e of client.sendMessages(
      { id: session.id, messages: [{ role: "user", content: "over grpc" }] },
      { headers },
    ))
      types.push(e.type);
    assert.equal(types.at(-1), "done");
    const got = await client.getSession({ id: session.id }, { headers });
    assert.equal(got.events[0]?.content, "over grpc");
  });
});
