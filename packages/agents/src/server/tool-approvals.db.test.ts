import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import {
  agentAndSession as agentAndSessionVia,
  type RestCallOptions,
  rejoinEvents,
  restCall,
  type ServerHarness,
  type SseFrame,
  sendMessage,
  startServerHarness,
} from "../testing/harness.ts";
import { ScriptedModel } from "../testing/scripted-model.ts";
import { scopeOf } from "./scopes.ts";

// Tool permission policies (issue 20 items 1 and 7) through the real
// service: REST + SSE on the public port, gRPC on the internal one. A call
// of an `ask` tool pauses the run with `requires_action`; answers resume it.

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

type Frame = SseFrame;

const agentAndSession = (model: string, toolPermissions: Record<string, string>) =>
  agentAndSessionVia(h, { name: "A", slug: `a-${Math.random()}`, model, toolPermissions });

const send = (token: string, sessionId: string, content: string) => sendMessage(h.base, token, sessionId, content);

function decide(token: string, sessionId: string, decisions: Json[]) {
  return call("POST", `/v1/sessions/${sessionId}/tool-decisions`, { token, body: { decisions } });
}

/** The events after `after`, to the end of the run that follows (Last-Event-ID rejoin). */
const rejoin = (token: string, sessionId: string, after: number) => rejoinEvents(h.base, token, sessionId, after);

function assertConflict(res: { status: number; json: Json }, message: RegExp) {
  assert.equal(res.status, 409, JSON.stringify(res.json));
  assert.equal(res.json.error.code, "aborted");
  assert.match(res.json.error.message, message);
}

/** Without the events for clients only (a tool's live output, the sandbox's state). */
const core = (frames: Frame[]) =>
  frames.filter((f) => f.data.type !== "tool_output" && !String(f.data.type).startsWith("sandbox_"));

const bashCall = (id: string, command: string) =>
  ({ type: "tool_use", call: { id, name: "bash", input: { command } } }) as const;

describe("tool permissions on agents", () => {
  test("set on create, merged on update, validated naming the entry", async () => {
    const { caller, agent } = await agentAndSession("dev/echo", { bash: "ask" });
    assert.deepEqual(agent.toolPermissions, { bash: "ask" });
    const patched = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { toolPermissions: { write_file: "ask" } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json.toolPermissions, { bash: "ask", write_file: "ask" });
    const renamed = await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { name: "B" } });
    assert.deepEqual(renamed.json.toolPermissions, { bash: "ask", write_file: "ask" }, "absent: unchanged");
    const allowed = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { toolPermissions: { bash: "allow" } },
    });
    assert.deepEqual(allowed.json.toolPermissions, { bash: "allow", write_file: "ask" });

    const bad = await call("POST", "/v1/agents", {
      token: caller.token,
      body: { name: "A", slug: "bad", model: "dev/echo", toolPermissions: { bash: "maybe" } },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, "invalid_argument");
    assert.match(bad.json.error.message, /toolPermissions\["bash"\]/);
    const badName = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { toolPermissions: { "rm -rf": "ask" } },
    });
    assert.equal(badName.status, 400);
    assert.match(badName.json.error.message, /toolPermissions\["rm -rf"\]/);
    const plain = await agentAndSession("dev/echo", {});
    assert.deepEqual(plain.agent.toolPermissions, {});
  });
});

describe("requires_action", () => {
  test("ask → requires_action (stream closes, session idle) → allow → the tool runs → done, one continuous log", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const execsBefore = h.compute.execCalls.length;
    const first = await send(caller.token, session.id, "run: echo approved");
    assert.deepEqual(
      first.map((f) => f.data.type),
      ["tool_use", "requires_action"],
    );
    const paused = first.at(-1)!;
    const content = JSON.parse(paused.data.content);
    assert.equal(content.calls.length, 1);
    assert.equal(content.calls[0].name, "bash");
    assert.deepEqual(content.calls[0].input, { command: "echo approved" });
    assert.equal(content.calls[0].toolUseId, first[0]!.data.toolUseId);
    assert.equal(h.compute.execCalls.length, execsBefore, "nothing ran before the answer");

    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.json.session.status, "idle");
    assert.deepEqual(
      got.json.pendingToolCalls.map((c: Json) => [c.toolUseId, c.name, JSON.parse(c.input).command]),
      [[content.calls[0].toolUseId, "bash", "echo approved"]],
    );
    // A new message while calls wait: 409, the log unchanged.
    const busy = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "hello?" }] },
    });
    assertConflict(busy, /waits for answers/);
    // A rejoin while it waits replays to the pause and closes.
    assert.deepEqual(
      (await rejoin(caller.token, session.id, 1)).map((f) => f.data.type),
      ["tool_use", "requires_action"],
    );

    const answer = await decide(caller.token, session.id, [
      { toolUseId: content.calls[0].toolUseId, decision: "allow" },
    ]);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.resumed, true);
    assert.deepEqual(answer.json.pending, []);
    assert.equal(Number(answer.json.after), paused.id);

    const all = await rejoin(caller.token, session.id, paused.id);
    assert.equal(all[0]?.id, paused.id + 1, "the resumed run's events follow the pause");
    const rest = core(all);
    assert.equal(rest[0]?.data.type, "tool_result");
    assert.match(rest[0]!.data.content, /approved/);
    assert.equal(rest.at(-1)?.data.type, "done");
    assert.equal(h.compute.execCalls.length, execsBefore + 1);
    assert.ok(rest.some((f) => f.data.type === "text" && /exited with code 0/.test(f.data.content)));

    const log = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    const seqs = log.json.events.map((e: Json) => Number(e.seq));
    assert.deepEqual(
      seqs,
      seqs.map((_: number, i: number) => i + 1),
      "gapless",
    );
    assert.deepEqual(
      core(log.json.events.map((e: Json) => ({ id: 0, data: e })))
        .slice(0, 4)
        .map((f) => f.data.type),
      ["user", "tool_use", "requires_action", "tool_result"],
    );
    assert.deepEqual(log.json.pendingToolCalls, []);
    // Answered and resumed: the same answer again is a conflict.
    assertConflict(
      await decide(caller.token, session.id, [{ toolUseId: content.calls[0].toolUseId, decision: "allow" }]),
      /no tool calls waiting/,
    );
  });

  test("deny with a message: the model gets an error result carrying it, nothing runs", async () => {
    const { caller, session } = await agentAndSession("scripted/x", { bash: "ask" });
    const requests = scripted.requests.length;
    scripted.push([bashCall("call_deny", "echo secret")], [{ type: "text", text: "understood" }]);
    const execsBefore = h.compute.execCalls.length;
    const first = await send(caller.token, session.id, "do it");
    assert.equal(first.at(-1)?.data.type, "requires_action");
    const answer = await decide(caller.token, session.id, [
      { toolUseId: "call_deny", decision: "deny", message: "not on production" },
    ]);
    assert.equal(answer.json.resumed, true, answer.text);
    const rest = await rejoin(caller.token, session.id, first.at(-1)!.id);
    assert.deepEqual(
      rest.map((f) => f.data.type),
      ["tool_result", "text", "done"],
    );
    assert.equal(rest[0]!.data.isError, true);
    assert.match(rest[0]!.data.content, /denied/);
    assert.match(rest[0]!.data.content, /not on production/);
    assert.equal(h.compute.execCalls.length, execsBefore);
    const toModel = scripted.requests[requests + 1]!.messages.at(-1)!;
    assert.equal(toModel.role, "tool");
    assert.ok(toModel.role === "tool" && toModel.isError && /not on production/.test(toModel.content));
  });

  test("several calls in one turn, answered separately in reverse order; unknown and repeated answers → 409", async () => {
    const { caller, session } = await agentAndSession("scripted/x", { bash: "ask" });
    scripted.push(
      [
        bashCall("call_a", "echo a"),
        { type: "tool_use", call: { id: "call_b", name: "list_files", input: { path: "." } } },
        bashCall("call_c", "echo c"),
      ],
      [{ type: "text", text: "all three" }],
    );
    const execsBefore = h.compute.execCalls.length;
    const first = await send(caller.token, session.id, "three");
    const paused = first.at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    assert.deepEqual(
      JSON.parse(paused.data.content).calls.map((c: Json) => c.toolUseId),
      ["call_a", "call_c"],
      "the ask calls; the allowed one between them waits with them",
    );

    assertConflict(
      await decide(caller.token, session.id, [{ toolUseId: "call_b", decision: "allow" }]),
      /not one the session's run waits on/,
    );
    assertConflict(
      await decide(caller.token, session.id, [{ toolUseId: "nope", decision: "allow" }]),
      /not one the session's run waits on/,
    );
    const c = await decide(caller.token, session.id, [{ toolUseId: "call_c", decision: "deny", message: "no c" }]);
    assert.equal(c.status, 200, c.text);
    assert.equal(c.json.resumed, false);
    assert.deepEqual(
      c.json.pending.map((p: Json) => p.toolUseId),
      ["call_a"],
    );
    assertConflict(
      await decide(caller.token, session.id, [{ toolUseId: "call_c", decision: "allow" }]),
      /already answered/,
    );
    // A request with one good and one repeated answer records nothing.
    assertConflict(
      await decide(caller.token, session.id, [
        { toolUseId: "call_a", decision: "allow" },
        { toolUseId: "call_c", decision: "allow" },
      ]),
      /already answered/,
    );
    assert.equal(h.compute.execCalls.length, execsBefore, "nothing ran while one call waits");
    const a = await decide(caller.token, session.id, [{ toolUseId: "call_a", decision: "allow" }]);
    assert.equal(a.json.resumed, true, a.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.filter((f) => f.data.type === "tool_result").map((f) => [f.data.toolUseId, f.data.isError ?? false]),
      [
        ["call_a", false],
        ["call_b", false],
        ["call_c", true],
      ],
      "results in the model's order",
    );
    assert.equal(rest.at(-1)?.data.type, "done");
    assert.equal(h.compute.execCalls.length, execsBefore + 1, "only call_a ran a command");
  });

  test("the same over gRPC: the stream ends with requires_action, SubmitToolDecisions resumes, 409 is ABORTED", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const client = createClient(SessionService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    const events = [];
    for await (const e of client.sendMessages(
      { id: session.id, messages: [{ role: "user", content: "run: echo grpc" }] },
      { headers },
    ))
      events.push(e);
    const paused = events.at(-1)!;
    assert.equal(paused.type, "requires_action");
    const id = JSON.parse(paused.content).calls[0].toolUseId as string;
    const got = await client.getSession({ id: session.id }, { headers });
    assert.equal(got.pendingToolCalls[0]?.toolUseId, id);
    await assert.rejects(
      client.submitToolDecisions(
        { id: session.id, decisions: [{ toolUseId: "other", decision: "allow" }] },
        { headers },
      ),
      (err: unknown) => ConnectError.from(err).code === Code.Aborted,
    );
    await assert.rejects(
      client.submitToolDecisions({ id: session.id, decisions: [{ toolUseId: id, decision: "perhaps" }] }, { headers }),
      (err: unknown) => ConnectError.from(err).code === Code.InvalidArgument,
    );
    const answer = await client.submitToolDecisions(
      { id: session.id, decisions: [{ toolUseId: id, decision: "allow" }] },
      { headers },
    );
    assert.equal(answer.resumed, true);
    assert.equal(answer.after, paused.seq);
    const rest = [];
    for await (const e of client.streamEvents({ id: session.id, after: answer.after }, { headers }))
      if (e.type !== "tool_output" && !e.type.startsWith("sandbox_")) rest.push(e);
    assert.equal(rest[0]?.type, "tool_result");
    assert.match(rest[0]!.content, /grpc/);
    assert.equal(rest.at(-1)?.type, "done");
  });

  test("cancel while calls wait: error results for them, the session takes messages again", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const first = await send(caller.token, session.id, "run: echo never");
    assert.equal(first.at(-1)?.data.type, "requires_action");
    const cancelled = await call("POST", `/v1/sessions/${session.id}/cancel`, { token: caller.token });
    assert.equal(cancelled.json.cancelled, true);
    const tail = await rejoin(caller.token, session.id, first.at(-1)!.id);
    assert.deepEqual(
      tail.map((f) => [f.data.type, f.data.isError ?? false]),
      [
        ["tool_result", true],
        ["error", false],
      ],
    );
    const next = await send(caller.token, session.id, "hello");
    assert.equal(next.at(-1)?.data.type, "done");
  });

  test("a restart of the service while a run waits: the answer after it resumes the run", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const first = await send(caller.token, session.id, "run: echo after restart");
    const paused = first.at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    await h.restart();
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.json.pendingToolCalls.length, 1, "the pause is in the database");
    const id = got.json.pendingToolCalls[0].toolUseId;
    const answer = await decide(caller.token, session.id, [{ toolUseId: id, decision: "allow" }]);
    assert.equal(answer.json.resumed, true, answer.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.equal(rest[0]?.data.type, "tool_result");
    assert.match(rest[0]!.data.content, /after restart/);
    assert.equal(rest.at(-1)?.data.type, "done");
  });

  test("every call answered but not resumed (the server stopped in between): an empty request resumes it", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const first = await send(caller.token, session.id, "run: echo late");
    const paused = first.at(-1)!;
    const id = JSON.parse(paused.data.content).calls[0].toolUseId as string;
    // The answer is recorded, as the request that was cut off left it.
    await h.database.db
      .insertInto("session_tool_decisions")
      .values({ session_id: session.id, request_seq: paused.id, tool_use_id: id, decision: "allow", message: "" })
      .execute();
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.deepEqual(got.json.pendingToolCalls, []);
    const busy = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "hello?" }] },
    });
    assertConflict(busy, /empty decisions list/);
    const nudge = await decide(caller.token, session.id, []);
    assert.equal(nudge.json.resumed, true, nudge.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.match(rest[0]!.data.content, /late/);
    assert.equal(rest.at(-1)?.data.type, "done");
  });

  test("the last two answers at once, in two requests: the run resumes exactly once", async () => {
    const { caller, session } = await agentAndSession("scripted/x", { bash: "ask" });
    scripted.push([bashCall("call_x", "echo x"), bashCall("call_y", "echo y")], [{ type: "text", text: "both" }]);
    const execsBefore = h.compute.execCalls.length;
    const paused = (await send(caller.token, session.id, "two")).at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    const [x, y] = await Promise.all([
      decide(caller.token, session.id, [{ toolUseId: "call_x", decision: "allow" }]),
      decide(caller.token, session.id, [{ toolUseId: "call_y", decision: "allow" }]),
    ]);
    assert.equal(x.status, 200, x.text);
    assert.equal(y.status, 200, y.text);
    assert.equal([x.json.resumed, y.json.resumed].filter(Boolean).length, 1, `${x.text} ${y.text}`);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => [f.data.type, f.data.toolUseId ?? ""]),
      [
        ["tool_result", "call_x"],
        ["tool_result", "call_y"],
        ["text", ""],
        ["done", ""],
      ],
    );
    assert.equal(h.compute.execCalls.length, execsBefore + 2);
  });

  test("answered on another replica: that replica resumes the run, a stream on the first follows it to done", async () => {
    const { caller, session } = await agentAndSession("dev/echo", { bash: "ask" });
    const paused = (await send(caller.token, session.id, "run: echo elsewhere")).at(-1)!;
    const id = JSON.parse(paused.data.content).calls[0].toolUseId as string;
    const other = await h.replica();
    const otherBase = other.url;
    try {
      const res = await fetch(`${otherBase}/v1/sessions/${session.id}/tool-decisions`, {
        method: "POST",
        headers: { authorization: `Bearer ${caller.token}`, "content-type": "application/json" },
        body: JSON.stringify({ decisions: [{ toolUseId: id, decision: "allow" }] }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(((await res.json()) as Json).resumed, true);
      // Rejoined on the first replica, which runs nothing of it.
      const rest = core(await rejoin(caller.token, session.id, paused.id));
      assert.match(rest[0]!.data.content, /elsewhere/);
      assert.equal(rest.at(-1)?.data.type, "done");
    } finally {
      await other.server.close();
    }
  });

  test("API keys: answering is driving the session (sessions:run), reading the pending calls is read", () => {
    // The identity double's API keys do not have the platform's key shape
    // (the strict bearer check refuses them), so the table is checked here.
    assert.equal(scopeOf(SessionService.typeName, "SubmitToolDecisions"), "sessions:run");
    assert.equal(scopeOf(SessionService.typeName, "GetSession"), "read");
  });
});
