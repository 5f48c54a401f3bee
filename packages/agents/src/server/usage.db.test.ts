import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { EXEC_CPU_MS, EXEC_WALL_MS } from "../testing/compute-double.ts";
import { type RestCallOptions, restCall, type ServerHarness, startServerHarness } from "../testing/harness.ts";
import { ScriptedModel, type Step } from "../testing/scripted-model.ts";

// Usage records and budgets (issue 20 item 6) through the real service:
// REST + SSE on the public port, gRPC on the internal one, the scripted
// model reporting tokens and the compute double reporting each exec's CPU
// and wall time (as compute's ExecCompleted does).

const scripted = new ScriptedModel();
const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
let h: ServerHarness;

before(async () => {
  h = await startServerHarness({
    providers,
  });
});
after(async () => {
  await h?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

const call = (method: string, path: string, opts: RestCallOptions) => restCall(h.base, method, path, opts);

function framesOf(text: string): Json[] {
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((l) => l.startsWith("data:")))
    .map((block) =>
      JSON.parse(
        block
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim())
          .join("\n"),
      ),
    );
}

type Caller = ReturnType<ServerHarness["identity"]["caller"]>;

async function newAgent(caller: Caller, budgets?: Json): Promise<Json> {
  const agent = await call("POST", "/v1/agents", {
    token: caller.token,
    body: { name: "A", slug: `a-${Math.random()}`, model: "scripted/m1", ...(budgets ? { budgets } : {}) },
  });
  assert.equal(agent.status, 201, agent.text);
  return agent.json;
}

async function newSession(caller: Caller, agentId: string, budgets?: Json): Promise<Json> {
  const session = await call("POST", "/v1/sessions", {
    token: caller.token,
    body: { agentId, ...(budgets ? { budgets } : {}) },
  });
  assert.equal(session.status, 201, session.text);
  return session.json;
}

async function send(caller: Caller, sessionId: string, content = "go") {
  return call("POST", `/v1/sessions/${sessionId}/messages`, {
    token: caller.token,
    body: { messages: [{ role: "user", content }] },
  });
}

async function sendOk(caller: Caller, sessionId: string, content = "go"): Promise<Json[]> {
  const res = await send(caller, sessionId, content);
  assert.equal(res.status, 200, res.text);
  return framesOf(res.text);
}

const usage = (inputTokens: number, outputTokens: number): Step => ({ type: "usage", inputTokens, outputTokens });
const bash = (id: string, command: string): Step => ({
  type: "tool_use",
  call: { id, name: "bash", input: { command } },
});
/** A model turn with one bash call, then a closing text turn: 2 model calls, 1 tool call, 30 + 8 tokens. */
function toolTurn(): void {
  scripted.push([usage(10, 5), bash(`t${Math.random()}`, "echo hi")], [{ type: "text", text: "done" }, usage(20, 3)]);
}

describe("usage records", () => {
  test("a run with a tool call: tokens per model, tool calls, sandbox CPU and wall time, over REST and gRPC", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller);
    const session = await newSession(caller, agent.id);
    toolTurn();
    const frames = await sendOk(caller, session.id);
    assert.equal(frames.at(-1)!.type, "done");

    const res = await call("GET", `/v1/sessions/${session.id}/usage`, { token: caller.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.sessionId, session.id);
    assert.equal(res.json.agentId, agent.id);
    assert.deepEqual(res.json.usage, {
      inputTokens: 30,
      outputTokens: 8,
      modelCalls: 2,
      toolCalls: 1,
      sandboxCpuMs: EXEC_CPU_MS,
      sandboxWallMs: EXEC_WALL_MS,
      models: [{ model: "scripted/m1", inputTokens: 30, outputTokens: 8, calls: 2 }],
    });
    // GetSession carries the same record.
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.deepEqual(got.json.usage, res.json.usage);

    const client = createClient(UsageService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    const viaGrpc = await client.getSessionUsage({ id: session.id }, { headers });
    assert.equal(viaGrpc.usage?.inputTokens, 30n);
    assert.equal(viaGrpc.usage?.toolCalls, 1n);
    assert.equal(viaGrpc.usage?.sandboxCpuMs, BigInt(EXEC_CPU_MS));
    const summed = await client.getUsage({ sessionId: session.id }, { headers });
    assert.equal(summed.usage?.outputTokens, 8n);
    assert.equal(summed.sessions, 1n);
  });

  test("sums per agent and per organization over [since, until); rows outside the range are left out", async () => {
    const caller = h.identity.caller();
    const a = await newAgent(caller);
    const b = await newAgent(caller);
    const a1 = await newSession(caller, a.id);
    toolTurn();
    await sendOk(caller, a1.id);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const middle = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const a2 = await newSession(caller, a.id);
    toolTurn();
    await sendOk(caller, a2.id);
    const b1 = await newSession(caller, b.id);
    toolTurn();
    await sendOk(caller, b1.id);

    const get = async (query: string) => {
      const res = await call("GET", `/v1/usage?${query}`, { token: caller.token });
      assert.equal(res.status, 200, res.text);
      return res.json;
    };
    const agentAll = await get(`agentId=${a.id}`);
    assert.equal(agentAll.usage.inputTokens, 60);
    assert.equal(agentAll.usage.toolCalls, 2);
    assert.equal(agentAll.sessions, 2);
    const agentLater = await get(`agentId=${a.id}&since=${encodeURIComponent(middle)}`);
    assert.equal(agentLater.usage.inputTokens, 30, "a1's rows are before the range");
    assert.equal(agentLater.sessions, 1);
    assert.equal(agentLater.since, middle);
    const agentEarlier = await get(`agentId=${a.id}&until=${encodeURIComponent(middle)}`);
    assert.equal(agentEarlier.usage.modelCalls, 2);
    assert.equal(agentEarlier.usage.sandboxCpuMs, EXEC_CPU_MS);
    const org = await get("");
    assert.equal(org.usage.inputTokens, 90);
    assert.equal(org.usage.outputTokens, 24);
    assert.equal(org.usage.toolCalls, 3);
    assert.equal(org.usage.sandboxWallMs, 3 * EXEC_WALL_MS);
    assert.equal(org.sessions, 3);
    const orgLater = await get(
      `since=${encodeURIComponent(middle)}&until=${encodeURIComponent(new Date().toISOString())}`,
    );
    assert.equal(orgLater.usage.inputTokens, 60);

    // Another org sees none of it.
    const other = h.identity.caller();
    const theirs = await call("GET", "/v1/usage", { token: other.token });
    assert.equal(theirs.status, 200);
    assert.equal(theirs.json.usage.inputTokens, 0);
    assert.equal(theirs.json.sessions, 0);
    const byAgent = await call("GET", `/v1/usage?agentId=${a.id}`, { token: other.token });
    assert.equal(byAgent.json.usage.inputTokens, 0);
    const bySession = await call("GET", `/v1/usage?sessionId=${a1.id}`, { token: other.token });
    assert.equal(bySession.json.usage.inputTokens, 0);
    const session = await call("GET", `/v1/sessions/${a1.id}/usage`, { token: other.token });
    assert.equal(session.status, 404);
    const budgets = await call("PATCH", `/v1/sessions/${a1.id}/budgets`, {
      token: other.token,
      body: { maxTokens: 1 },
    });
    assert.equal(budgets.status, 404);
  });

  test("usage survives a restart of the service", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller);
    const session = await newSession(caller, agent.id);
    toolTurn();
    await sendOk(caller, session.id);
    const before = await call("GET", `/v1/sessions/${session.id}/usage`, { token: caller.token });
    await h.restart();
    const afterRestart = await call("GET", `/v1/sessions/${session.id}/usage`, { token: caller.token });
    assert.deepEqual(afterRestart.json.usage, before.json.usage);
    assert.equal(afterRestart.json.usage.inputTokens, 30);
  });

  test("bad ranges and values are 400", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller);
    const session = await newSession(caller, agent.id);
    const bad = async (method: string, path: string, body?: unknown) => {
      const res = await call(method, path, { token: caller.token, body });
      assert.equal(res.status, 400, `${method} ${path}: ${res.text}`);
      assert.equal(res.json.error.code, "invalid_argument");
      return res.json.error.message as string;
    };
    assert.match(await bad("GET", "/v1/usage?since=yesterday"), /since must be an RFC 3339 time/);
    assert.match(await bad("GET", "/v1/usage?until=2026-13-45T00:00:00Z"), /until/);
    assert.match(
      await bad("GET", "/v1/usage?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z"),
      /until must not be before since/,
    );
    await bad("GET", "/v1/usage?agentId=not-a-uuid");
    await bad("GET", "/v1/usage?sessionId=42");
    await bad("GET", "/v1/sessions/not-a-uuid/usage");
    await bad("POST", "/v1/agents", { name: "A", slug: "s-neg", model: "scripted/m1", budgets: { maxTokens: -1 } });
    assert.match(
      await bad("POST", "/v1/agents", {
        name: "A",
        slug: "s-big",
        model: "scripted/m1",
        budgets: { maxToolCalls: "18446744073709551615" },
      }),
      /budgets.maxToolCalls must be a whole number/,
    );
    await bad("PATCH", `/v1/agents/${agent.id}`, { budgets: { maxCpuSeconds: "x" } });
    await bad("POST", "/v1/sessions", { agentId: agent.id, budgets: { maxTokens: 1.5 } });
    await bad("PATCH", `/v1/sessions/${session.id}/budgets`, { maxTokens: "99999999999999999999" });
  });
});

describe("budgets", () => {
  test("set on agents (create, merge on update, 0 removes) and sessions (own and effective)", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller, { maxTokens: 100, maxToolCalls: 5 });
    assert.deepEqual(agent.budgets, { maxTokens: 100, maxToolCalls: 5, maxCpuSeconds: null });
    const patched = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { budgets: { maxToolCalls: 0, maxCpuSeconds: 3 } },
    });
    assert.deepEqual(patched.json.budgets, { maxTokens: 100, maxToolCalls: null, maxCpuSeconds: 3 });
    const session = await newSession(caller, agent.id, { maxTokens: 50 });
    assert.equal(session.budgets.maxTokens, 50);
    const usage = await call("GET", `/v1/sessions/${session.id}/usage`, { token: caller.token });
    assert.equal(usage.json.budgets.maxTokens, 50);
    assert.deepEqual(usage.json.effectiveBudgets, { maxTokens: 50, maxToolCalls: null, maxCpuSeconds: 3 });
  });

  test("the tokens budget: budget_reached ends the turn before the tool call, the session idle; next send 429 until raised", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller, { maxTokens: 20 });
    const session = await newSession(caller, agent.id);
    scripted.push([usage(15, 10), bash("tok_1", "echo never")]);
    const execs = h.compute.execCalls.length;
    const frames = await sendOk(caller, session.id);
    const last = frames.at(-1)!;
    assert.equal(last.type, "budget_reached");
    assert.deepEqual(JSON.parse(last.content), { budget: "tokens", limit: 20, used: 25 });
    assert.equal(last.tokensIn, 15);
    assert.equal(h.compute.execCalls.length, execs, "the tool call did not run");
    const result = frames.find((f) => f.type === "tool_result")!;
    assert.equal(result.toolUseId, "tok_1");
    assert.equal(result.isError, true);
    assert.match(result.content, /not run: the session reached its tokens budget/);

    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.json.session.status, "idle");
    assert.equal(got.json.events.at(-1).type, "budget_reached");

    const refused = await send(caller, session.id);
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.json.error.code, "resource_exhausted");
    assert.match(refused.json.error.message, /reached its tokens budget \(used 25 of 20\)/);
    const unchanged = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(unchanged.json.session.lastSeq, got.json.session.lastSeq, "nothing of the refused send is logged");

    const raised = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { budgets: { maxTokens: 1000 } },
    });
    assert.equal(raised.status, 200, raised.text);
    scripted.push([{ type: "text", text: "again" }, usage(30, 2)]);
    const again = await sendOk(caller, session.id);
    assert.equal(again.at(-1)!.type, "done");
    // The model saw the unrun call closed: its history has the error result.
    const history = scripted.requests.at(-1)!.messages;
    assert.ok(history.some((m) => m.role === "tool" && m.toolUseId === "tok_1" && m.isError));
  });

  test("the tool calls budget (a session's own): reached after the call, before the next model call; raised on the session", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller, { maxToolCalls: 10 });
    const session = await newSession(caller, agent.id, { maxToolCalls: 1 });
    scripted.push([usage(1, 1), bash("tc_1", "echo one")]);
    const requests = scripted.requests.length;
    const frames = await sendOk(caller, session.id);
    assert.deepEqual(
      frames.filter((f) => f.type !== "tool_output" && !String(f.type).startsWith("sandbox_")).map((f) => f.type),
      ["tool_use", "tool_result", "budget_reached"],
    );
    assert.notEqual(frames.find((f) => f.type === "tool_result")!.isError, true, "the call within the budget ran");
    assert.deepEqual(JSON.parse(frames.at(-1)!.content), { budget: "tool_calls", limit: 1, used: 1 });
    assert.equal(scripted.requests.length, requests + 1, "no model call after the budget was reached");

    // Refused over gRPC too: RESOURCE_EXHAUSTED.
    const client = createClient(SessionService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    await assert.rejects(
      async () => {
        for await (const _ of client.sendMessages(
          { id: session.id, messages: [{ role: "user", content: "more" }] },
          { headers },
        ));
      },
      (err: unknown) => ConnectError.from(err).code === Code.ResourceExhausted,
    );

    const raised = await call("PATCH", `/v1/sessions/${session.id}/budgets`, {
      token: caller.token,
      body: { maxToolCalls: 2 },
    });
    assert.equal(raised.status, 200, raised.text);
    assert.equal(raised.json.effectiveBudgets.maxToolCalls, 2);
    scripted.push([{ type: "text", text: "fine" }, usage(1, 1)]);
    const again = await sendOk(caller, session.id);
    assert.equal(again.at(-1)!.type, "done");
  });

  test("the CPU seconds budget: compute's reported CPU time ends the run; 0 removes the limit", async () => {
    const caller = h.identity.caller();
    const agent = await newAgent(caller);
    const session = await newSession(caller, agent.id, { maxCpuSeconds: 1 });
    h.compute.execCpuMs = 1500;
    try {
      scripted.push([usage(1, 1), bash("cpu_1", "echo busy")]);
      const frames = await sendOk(caller, session.id);
      assert.deepEqual(JSON.parse(frames.at(-1)!.content), { budget: "cpu_seconds", limit: 1, used: 1.5 });
      assert.equal(frames.at(-1)!.type, "budget_reached");
    } finally {
      h.compute.execCpuMs = EXEC_CPU_MS;
    }
    const refused = await send(caller, session.id);
    assert.equal(refused.status, 429);
    const removed = await call("PATCH", `/v1/sessions/${session.id}/budgets`, {
      token: caller.token,
      body: { maxCpuSeconds: 0 },
    });
    assert.equal(removed.json.budgets.maxCpuSeconds, null);
    scripted.push([{ type: "text", text: "ok" }, usage(1, 1)]);
    assert.equal((await sendOk(caller, session.id)).at(-1)!.type, "done");
    const final = await call("GET", `/v1/sessions/${session.id}/usage`, { token: caller.token });
    assert.equal(final.json.usage.sandboxCpuMs, 1500);
  });
});
