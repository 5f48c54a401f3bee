import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import type { ModelMessage } from "../providers/provider.ts";
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

// Client tools (issue 20 item 4) through the real service: REST + SSE on the
// public port, gRPC on the internal one, the scripted model calling them. A
// valid call pauses the run with `requires_action` (kind `client`), the
// client posts the result, the run resumes with it as the tool result; an
// input the schema refuses goes back to the model at once.

const scripted = new ScriptedModel();
const providers = new ProviderRegistry().register("scripted", scripted);
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

const colorSchema = {
  type: "object",
  properties: { color: { type: "string", enum: ["red", "green", "blue"] }, shade: { type: "integer", minimum: 1 } },
  required: ["color"],
  additionalProperties: false,
};
const pickColor = { name: "pick_color", description: "Ask the user to pick a color.", inputSchema: colorSchema };
const asText = (t: { name: string; description: string; inputSchema: unknown }) => ({
  ...t,
  inputSchema: JSON.stringify(t.inputSchema),
});

const agentAndSession = (body: Json = {}) =>
  agentAndSessionVia(h, {
    name: "A",
    slug: `a-${Math.random()}`,
    model: "scripted/x",
    clientTools: [asText(pickColor)],
    ...body,
  });

const send = (token: string, sessionId: string, content: string) => sendMessage(h.base, token, sessionId, content);

function decide(token: string, sessionId: string, decisions: Json[]) {
  return call("POST", `/v1/sessions/${sessionId}/tool-decisions`, { token, body: { decisions } });
}

/** The events after `after`, to the end of the run that follows (Last-Event-ID rejoin). */
const rejoin = (token: string, sessionId: string, after: number) => rejoinEvents(h.base, token, sessionId, after);

const core = (frames: Frame[]) =>
  frames.filter((f) => f.data.type !== "tool_output" && !String(f.data.type).startsWith("sandbox_"));

const colorCall = (id: string, input: Record<string, unknown>) =>
  ({ type: "tool_use", call: { id, name: "pick_color", input } }) as const;

/** The tool message the model got for `toolUseId` in request `index` of the scripted model. */
function toolMessage(index: number, toolUseId: string): Extract<ModelMessage, { role: "tool" }> {
  const message = scripted.requests[index]?.messages.find((m) => m.role === "tool" && m.toolUseId === toolUseId);
  assert.ok(message && message.role === "tool", `request ${index} carries the result of ${toolUseId}`);
  return message;
}

describe("client tools on agents", () => {
  test("set on create, merged by name on update (empty schema removes), returned with their schemas", async () => {
    const { caller, agent } = await agentAndSession();
    assert.deepEqual(agent.clientTools, [asText(pickColor)]);
    assert.deepEqual(JSON.parse(agent.clientTools[0].inputSchema), colorSchema);
    const ask = { name: "ask_user", description: "Ask a question.", inputSchema: { type: "object" } };
    const patched = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { clientTools: [asText(ask)] },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(
      patched.json.clientTools.map((t: Json) => t.name),
      ["pick_color", "ask_user"],
    );
    const renamed = await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { name: "B" } });
    assert.equal(renamed.json.clientTools.length, 2, "absent: unchanged");
    const removed = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: { clientTools: [{ name: "pick_color", description: "", inputSchema: "" }] },
    });
    assert.deepEqual(
      removed.json.clientTools.map((t: Json) => t.name),
      ["ask_user"],
    );
    const plain = await call("POST", "/v1/agents", {
      token: caller.token,
      body: { name: "P", slug: `p-${Math.random()}`, model: "scripted/x" },
    });
    assert.deepEqual(plain.json.clientTools, []);
  });

  test("refused with INVALID_ARGUMENT naming the tool: bad name, built-in name, invalid schema, too many", async () => {
    const caller = h.identity.caller();
    const create = (clientTools: Json[]) =>
      call("POST", "/v1/agents", {
        token: caller.token,
        body: { name: "A", slug: `a-${Math.random()}`, model: "scripted/x", clientTools },
      });
    const cases: [Json[], RegExp][] = [
      [[{ name: "has space", description: "", inputSchema: "{}" }], /clientTools\[0\].*1 to 64 characters/],
      [[{ name: "bash", description: "", inputSchema: '{"type":"object"}' }], /"bash" is a built-in tool's name/],
      [[{ name: "a__b", description: "", inputSchema: '{"type":"object"}' }], /\("a__b"\).*reserved for MCP/],
      [[{ name: "t", description: "", inputSchema: "{not json" }], /\("t"\): inputSchema is not JSON/],
      [[{ name: "t", description: "", inputSchema: '{"type":"string"}' }], /\("t"\).*"type": "object"/],
      [
        [{ name: "t", description: "", inputSchema: '{"type":"object","properties":{"a":{"minLength":-1}}}' }],
        /\("t"\): inputSchema is not a valid JSON Schema/,
      ],
      [
        [
          {
            name: "t",
            description: "",
            inputSchema: '{"type":"object","properties":{"a":{"$ref":"https://x.test/s"}}}',
          },
        ],
        /\("t"\): inputSchema is not a valid JSON Schema: can't resolve reference/,
      ],
      [
        [
          { name: "t", description: "", inputSchema: '{"type":"object"}' },
          { name: "t", description: "", inputSchema: '{"type":"object"}' },
        ],
        /clientTools\[1\] \("t"\): the name is given twice/,
      ],
      [
        Array.from({ length: 33 }, (_, i) => ({ name: `t${i}`, description: "", inputSchema: '{"type":"object"}' })),
        /more than 32 tools/,
      ],
    ];
    for (const [tools, message] of cases) {
      const res = await create(tools);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, "invalid_argument");
      assert.match(res.json.error.message, message);
    }
    const { caller: owner, agent } = await agentAndSession();
    const bad = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: owner.token,
      body: { clientTools: [{ name: "u", description: "", inputSchema: '{"type":"object","required":"x"}' }] },
    });
    assert.equal(bad.status, 400, bad.text);
    assert.match(bad.json.error.message, /clientTools\[0\] \("u"\): inputSchema is not a valid JSON Schema/);
  });
});

describe("a client tool's call", () => {
  test("valid input → requires_action (kind client) → the client's result → the model's next request has it", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_color", { color: "green", shade: 2 })], [{ type: "text", text: "green it is" }]);
    const execsBefore = h.compute.execCalls.length;
    const first = await send(caller.token, session.id, "pick one");
    assert.deepEqual(
      first.map((f) => f.data.type),
      ["tool_use", "requires_action"],
    );
    // The model was offered the tool with its schema, next to the built-ins.
    const offered = scripted.requests[requests]!.tools.find((t) => t.name === "pick_color");
    assert.deepEqual(offered, pickColor);
    assert.ok(scripted.requests[requests]!.tools.some((t) => t.name === "bash"));

    const paused = first.at(-1)!;
    assert.deepEqual(JSON.parse(paused.data.content).calls, [
      { toolUseId: "call_color", name: "pick_color", input: { color: "green", shade: 2 }, kind: "client" },
    ]);
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.json.session.status, "idle");
    assert.deepEqual(
      got.json.pendingToolCalls.map((c: Json) => [c.toolUseId, c.name, c.kind]),
      [["call_color", "pick_color", "client"]],
    );

    const answer = await decide(caller.token, session.id, [
      { toolUseId: "call_color", result: { content: '{"picked":"green"}' } },
    ]);
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.resumed, true);
    assert.equal(Number(answer.json.after), paused.id);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => [f.data.type, f.data.content]),
      [
        ["tool_result", '{"picked":"green"}'],
        ["text", "green it is"],
        ["done", undefined],
      ],
    );
    assert.equal(rest[0]!.id, paused.id + 1, "one continuous log");
    assert.equal(rest[0]!.data.isError ?? false, false);
    const toModel = toolMessage(requests + 1, "call_color");
    assert.equal(toModel.content, '{"picked":"green"}');
    assert.equal(toModel.isError, false);
    assert.equal(h.compute.execCalls.length, execsBefore, "a client tool runs nothing in the sandbox");
  });

  test("input the schema refuses: an error result goes to the model at once, no pause, the client never sees it", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_bad", { color: "purple" })], [{ type: "text", text: "sorry" }]);
    const frames = core(await send(caller.token, session.id, "pick"));
    assert.deepEqual(
      frames.map((f) => f.data.type),
      ["tool_use", "tool_result", "text", "done"],
    );
    assert.equal(frames[1]!.data.isError, true);
    assert.match(frames[1]!.data.content, /does not match the pick_color tool's input schema/);
    const toModel = toolMessage(requests + 1, "call_bad");
    assert.equal(toModel.isError, true);
    assert.match(toModel.content, /input\/color must be equal to one of the allowed values/);
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.deepEqual(got.json.pendingToolCalls, []);
    assert.ok(!got.json.events.some((e: Json) => e.type === "requires_action"));
  });

  test("an error result from the client reaches the model as an error", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_err", { color: "red" })], [{ type: "text", text: "it failed" }]);
    const paused = (await send(caller.token, session.id, "pick")).at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    const answer = await decide(caller.token, session.id, [
      { toolUseId: "call_err", decision: "result", result: { content: "the dialog was closed", isError: true } },
    ]);
    assert.equal(answer.json.resumed, true, answer.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => [f.data.type, f.data.isError ?? false]),
      [
        ["tool_result", true],
        ["text", false],
        ["done", false],
      ],
    );
    const toModel = toolMessage(requests + 1, "call_err");
    assert.deepEqual([toModel.content, toModel.isError], ["the dialog was closed", true]);
  });

  test("wrong answer kinds: allow for a client call and a result for an ask call → 409; malformed → 400", async () => {
    const { caller, session } = await agentAndSession({ toolPermissions: { bash: "ask" } });
    scripted.push(
      [
        { type: "tool_use", call: { id: "call_bash", name: "bash", input: { command: "echo hi" } } },
        colorCall("call_pick", { color: "blue" }),
        colorCall("call_invalid", { color: 7 }),
      ],
      [{ type: "text", text: "both answered" }],
    );
    const execsBefore = h.compute.execCalls.length;
    const paused = (await send(caller.token, session.id, "two kinds")).at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    assert.deepEqual(
      JSON.parse(paused.data.content).calls.map((c: Json) => [c.toolUseId, c.kind ?? ""]),
      [
        ["call_bash", ""],
        ["call_pick", "client"],
      ],
      "the invalid call waits for nothing",
    );
    const conflict = async (decisions: Json[], reason: RegExp) => {
      const res = await decide(caller.token, session.id, decisions);
      assert.equal(res.status, 409, res.text);
      assert.equal(res.json.error.code, "aborted");
      assert.match(res.json.error.message, reason);
    };
    await conflict(
      [{ toolUseId: "call_pick", decision: "allow" }],
      /client tool pick_color: answer it with its result/,
    );
    await conflict([{ toolUseId: "call_bash", result: { content: "fake" } }], /waits for allow or deny/);
    // Nothing of a refused request is recorded: the valid answer in it neither.
    await conflict(
      [
        { toolUseId: "call_bash", decision: "allow" },
        { toolUseId: "call_pick", decision: "allow" },
      ],
      /answer it with its result/,
    );
    const malformed = async (decision: Json, message: RegExp) => {
      const res = await decide(caller.token, session.id, [decision]);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, "invalid_argument");
      assert.match(res.json.error.message, message);
    };
    await malformed({ toolUseId: "call_pick", decision: "allow", result: { content: "x" } }, /not "allow"/);
    await malformed({ toolUseId: "call_pick", decision: "result" }, /result is required/);
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.equal(got.json.pendingToolCalls.length, 2, "still both pending");

    const pick = await decide(caller.token, session.id, [{ toolUseId: "call_pick", result: { content: "blue!" } }]);
    assert.equal(pick.json.resumed, false, pick.text);
    const bash = await decide(caller.token, session.id, [{ toolUseId: "call_bash", decision: "allow" }]);
    assert.equal(bash.json.resumed, true, bash.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.filter((f) => f.data.type === "tool_result").map((f) => [f.data.toolUseId, f.data.isError ?? false]),
      [
        ["call_bash", false],
        ["call_pick", false],
        ["call_invalid", true],
      ],
      "results in the model's order",
    );
    assert.equal(rest.find((f) => f.data.toolUseId === "call_pick")?.data.content, "blue!");
    assert.match(rest.find((f) => f.data.toolUseId === "call_invalid")!.data.content, /input schema/);
    assert.equal(rest.at(-1)?.data.type, "done");
    assert.equal(h.compute.execCalls.length, execsBefore + 1, "only the bash call ran");
  });

  test("a client call can be denied: the model gets the denial", async () => {
    const { caller, session } = await agentAndSession();
    scripted.push([colorCall("call_no", { color: "red" })], [{ type: "text", text: "ok" }]);
    const paused = (await send(caller.token, session.id, "pick")).at(-1)!;
    const answer = await decide(caller.token, session.id, [
      { toolUseId: "call_no", decision: "deny", message: "not now" },
    ]);
    assert.equal(answer.json.resumed, true, answer.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.equal(rest[0]!.data.isError, true);
    assert.match(rest[0]!.data.content, /denied.*not now/);
  });

  test("two client calls in one turn, answered in two requests in reverse order: results in the model's order", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push(
      [colorCall("call_one", { color: "red" }), colorCall("call_two", { color: "blue" })],
      [{ type: "text", text: "both" }],
    );
    const paused = (await send(caller.token, session.id, "two")).at(-1)!;
    assert.deepEqual(
      JSON.parse(paused.data.content).calls.map((c: Json) => [c.toolUseId, c.kind]),
      [
        ["call_one", "client"],
        ["call_two", "client"],
      ],
    );
    const two = await decide(caller.token, session.id, [{ toolUseId: "call_two", result: { content: "second" } }]);
    assert.equal(two.json.resumed, false, two.text);
    assert.deepEqual(
      two.json.pending.map((p: Json) => [p.toolUseId, p.kind]),
      [["call_one", "client"]],
    );
    const again = await decide(caller.token, session.id, [{ toolUseId: "call_two", result: { content: "x" } }]);
    assert.equal(again.status, 409, again.text);
    assert.match(again.json.error.message, /already answered/);
    const one = await decide(caller.token, session.id, [{ toolUseId: "call_one", result: { content: "first" } }]);
    assert.equal(one.json.resumed, true, one.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => [f.data.type, f.data.toolUseId ?? "", f.data.content ?? ""]),
      [
        ["tool_result", "call_one", "first"],
        ["tool_result", "call_two", "second"],
        ["text", "", "both"],
        ["done", "", ""],
      ],
    );
    const next = scripted.requests[requests + 1]!.messages.filter((m) => m.role === "tool");
    assert.deepEqual(
      next.map((m) => m.role === "tool" && [m.toolUseId, m.content]),
      [
        ["call_one", "first"],
        ["call_two", "second"],
      ],
    );
  });

  test("a result recorded but not resumed (the server stopped in between): an empty request resumes with it", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_late", { color: "green" })], [{ type: "text", text: "late" }]);
    const paused = (await send(caller.token, session.id, "pick")).at(-1)!;
    // The answer as a request cut off after recording it left it.
    await h.database.db
      .insertInto("session_tool_decisions")
      .values({
        session_id: session.id,
        request_seq: paused.id,
        tool_use_id: "call_late",
        decision: "result",
        message: "",
        result_content: "recorded before the stop",
        result_is_error: true,
      })
      .execute();
    const nudge = await decide(caller.token, session.id, []);
    assert.equal(nudge.json.resumed, true, nudge.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => [f.data.type, f.data.content ?? "", f.data.isError ?? false]),
      [
        ["tool_result", "recorded before the stop", true],
        ["text", "late", false],
        ["done", "", false],
      ],
    );
    assert.equal(toolMessage(requests + 1, "call_late").isError, true);
  });

  test("over gRPC: the stream ends with requires_action, a result resumes, a wrong kind is ABORTED", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_grpc", { color: "red" })], [{ type: "text", text: "red" }]);
    const client = createClient(SessionService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    const events = [];
    for await (const e of client.sendMessages(
      { id: session.id, messages: [{ role: "user", content: "pick" }] },
      { headers },
    ))
      events.push(e);
    const paused = events.at(-1)!;
    assert.equal(paused.type, "requires_action");
    assert.equal(JSON.parse(paused.content).calls[0].kind, "client");
    const got = await client.getSession({ id: session.id }, { headers });
    assert.deepEqual(
      got.pendingToolCalls.map((c) => [c.toolUseId, c.kind]),
      [["call_grpc", "client"]],
    );
    await assert.rejects(
      client.submitToolDecisions(
        { id: session.id, decisions: [{ toolUseId: "call_grpc", decision: "allow" }] },
        { headers },
      ),
      (err: unknown) => ConnectError.from(err).code === Code.Aborted,
    );
    const answer = await client.submitToolDecisions(
      { id: session.id, decisions: [{ toolUseId: "call_grpc", result: { content: "red picked", isError: false } }] },
      { headers },
    );
    assert.equal(answer.resumed, true);
    const rest = [];
    for await (const e of client.streamEvents({ id: session.id, after: answer.after }, { headers }))
      if (e.type !== "tool_output" && !e.type.startsWith("sandbox_")) rest.push(e);
    assert.deepEqual(
      rest.map((e) => [e.type, e.content]),
      [
        ["tool_result", "red picked"],
        ["text", "red"],
        ["done", ""],
      ],
    );
    assert.equal(toolMessage(requests + 1, "call_grpc").content, "red picked");
  });

  test("a restart of the service while a client call waits: the result posted after it resumes the run", async () => {
    const { caller, session } = await agentAndSession();
    const requests = scripted.requests.length;
    scripted.push([colorCall("call_restart", { color: "blue" })], [{ type: "text", text: "after restart" }]);
    const paused = (await send(caller.token, session.id, "pick")).at(-1)!;
    assert.equal(paused.data.type, "requires_action");
    await h.restart();
    const got = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.deepEqual(
      got.json.pendingToolCalls.map((c: Json) => [c.toolUseId, c.kind]),
      [["call_restart", "client"]],
      "the pause and its kind are in the database",
    );
    const answer = await decide(caller.token, session.id, [
      { toolUseId: "call_restart", result: { content: "blue, after the restart" } },
    ]);
    assert.equal(answer.json.resumed, true, answer.text);
    const rest = core(await rejoin(caller.token, session.id, paused.id));
    assert.deepEqual(
      rest.map((f) => f.data.type),
      ["tool_result", "text", "done"],
    );
    assert.equal(rest[0]!.data.content, "blue, after the restart");
    assert.equal(toolMessage(requests + 1, "call_restart").content, "blue, after the restart");
  });
});
