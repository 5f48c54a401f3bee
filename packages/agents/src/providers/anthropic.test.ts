import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { deadUrl, named, ReplayServer } from "../testing/replay-server.ts";
import { AnthropicProvider, toAnthropicMessages } from "./anthropic.ts";
import { baseRequest, clientToolRequest, mcpToolRequest, modelProviderContract, type WireView } from "./contract.ts";
import type { ModelEvent } from "./provider.ts";

// Frames as the Messages API streams them (event name + JSON data).
const messageStart = (input: number) =>
  named("message_start", {
    type: "message_start",
    message: {
      id: "msg_1",
      type: "message",
      role: "assistant",
      content: [],
      model: "claude-test",
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: input, output_tokens: 1 },
    },
  });
const textStart = (index: number) =>
  named("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
const textDelta = (index: number, text: string) =>
  named("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } });
const blockStop = (index: number) => named("content_block_stop", { type: "content_block_stop", index });
const toolStart = (index: number, id: string, name: string) =>
  named("content_block_start", {
    type: "content_block_start",
    index,
    content_block: { type: "tool_use", id, name, input: {} },
  });
const jsonDelta = (index: number, partial_json: string) =>
  named("content_block_delta", {
    type: "content_block_delta",
    index,
    delta: { type: "input_json_delta", partial_json },
  });
const messageDelta = (stop: string, output: number) =>
  named("message_delta", {
    type: "message_delta",
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: output },
  });
const messageStop = named("message_stop", { type: "message_stop" });
const ping = named("ping", { type: "ping" });

const textReply = [
  messageStart(25),
  textStart(0),
  ping,
  textDelta(0, "Hello"),
  textDelta(0, ", world"),
  blockStop(0),
  messageDelta("end_turn", 12),
  messageStop,
];
const toolReply = [
  messageStart(40),
  textStart(0),
  textDelta(0, "Let me check."),
  blockStop(0),
  toolStart(1, "toolu_01A", "bash"),
  jsonDelta(1, ""),
  jsonDelta(1, '{"comm'),
  jsonDelta(1, 'and": "ls'),
  jsonDelta(1, ' -la"}'),
  blockStop(1),
  messageDelta("tool_use", 30),
  messageStop,
];

let server: ReplayServer;
before(async () => {
  server = new ReplayServer();
  await server.start();
});
after(() => server.stop());

const provider = () => new AnthropicProvider({ apiKey: "sk-ant-test", baseUrl: server.url });

modelProviderContract("anthropic", async (scenario) => {
  switch (scenario) {
    case "text":
      server.push({ kind: "sse", frames: textReply });
      return { provider: provider(), request: baseRequest("hi"), expectedText: "Hello, world" };
    case "tool":
      server.push({ kind: "sse", frames: toolReply });
      return { provider: provider(), request: baseRequest("list") };
    case "midStreamError":
      server.push({
        kind: "sse",
        frames: [
          messageStart(10),
          textStart(0),
          textDelta(0, "Partial"),
          named("error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }),
        ],
      });
      return { provider: provider(), request: baseRequest("hi") };
    case "abort":
      server.push({
        kind: "sse",
        frames: [
          messageStart(10),
          textStart(0),
          ...Array.from({ length: 50 }, (_, i) => textDelta(0, `w${i} `)),
          blockStop(0),
          messageStop,
        ],
      });
      return { provider: provider(), request: baseRequest("hi") };
    case "unreachable":
      return { provider: new AnthropicProvider({ apiKey: "k", baseUrl: await deadUrl() }), request: baseRequest("hi") };
    case "clientTool":
      server.push({
        kind: "sse",
        frames: [
          messageStart(80),
          toolStart(0, "toolu_pick", "pick_color"),
          jsonDelta(0, '{"color"'),
          jsonDelta(0, ': "green"}'),
          blockStop(0),
          messageDelta("tool_use", 20),
          messageStop,
        ],
      });
      return { provider: provider(), request: clientToolRequest(), wire: () => wireOf(server.requests.at(-1)!.body) };
    case "mcpTool":
      server.push({
        kind: "sse",
        frames: [
          messageStart(90),
          toolStart(0, "toolu_mcp", "github__create_issue"),
          jsonDelta(0, '{"title": "Crash on start",'),
          jsonDelta(0, ' "labels": ["bug"]}'),
          blockStop(0),
          messageDelta("tool_use", 25),
          messageStop,
        ],
      });
      return { provider: provider(), request: mcpToolRequest(), wire: () => wireOf(server.requests.at(-1)!.body) };
  }
});

/** The Messages API's shapes: tools with input_schema, tool_use blocks, tool_result blocks with is_error. */
// biome-ignore lint/suspicious/noExplicitAny: the recorded request body, read as the API defines it
function wireOf(body: Record<string, any>): WireView {
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const blocks = (body.messages as any[]).flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  return {
    // biome-ignore lint/suspicious/noExplicitAny: as above
    tools: (body.tools as any[]).map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.input_schema,
    })),
    calls: blocks.filter((b) => b.type === "tool_use").map((b) => ({ id: b.id, name: b.name, input: b.input })),
    results: blocks
      .filter((b) => b.type === "tool_result")
      .map((b) => ({ toolUseId: b.tool_use_id, content: b.content, isError: b.is_error === true })),
  };
}

async function drain(stream: AsyncIterable<ModelEvent>) {
  const out: ModelEvent[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

test("anthropic: output tokens are message_delta's running total, never added to message_start's", async () => {
  server.push({ kind: "sse", frames: textReply });
  const events = await drain(await provider().start(baseRequest("hi"), new AbortController().signal));
  const usage = events.filter((e) => e.type === "usage");
  assert.deepEqual(usage.at(-1), { type: "usage", inputTokens: 25, outputTokens: 12 });
});

test("anthropic: request carries key, version, stream, tools and the system prompt", async () => {
  server.push({ kind: "sse", frames: textReply });
  const request = { ...baseRequest("hi", "claude-x"), system: "be brief" };
  await drain(await provider().start(request, new AbortController().signal));
  const got = server.requests.at(-1)!;
  assert.equal(got.path, "/v1/messages");
  assert.equal(got.headers["x-api-key"], "sk-ant-test");
  assert.equal(got.headers["anthropic-version"], "2023-06-01");
  assert.equal(got.body.stream, true);
  assert.equal(got.body.model, "claude-x");
  assert.equal(got.body.system, "be brief");
  assert.equal(got.body.max_tokens, 256);
  assert.deepEqual((got.body.tools as Array<{ name: string; input_schema: unknown }>)[0]!.name, "bash");
  assert.ok((got.body.tools as Array<{ input_schema: unknown }>)[0]!.input_schema);
});

test("anthropic: an HTTP error before the stream is unavailable with the provider's message", async () => {
  server.push({
    kind: "status",
    status: 529,
    body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
  });
  await assert.rejects(provider().start(baseRequest("hi"), new AbortController().signal), /HTTP 529: Overloaded/);
});

test("anthropic: a connection dropped mid-stream is an error after the partial text", async () => {
  server.push({ kind: "sse", frames: [messageStart(5), textStart(0), textDelta(0, "Par")], cut: true });
  const stream = await provider().start(baseRequest("hi"), new AbortController().signal);
  const seen: ModelEvent[] = [];
  await assert.rejects(async () => {
    for await (const e of stream) seen.push(e);
  });
  assert.deepEqual(
    seen.filter((e) => e.type === "text"),
    [{ type: "text", text: "Par" }],
  );
});

test("anthropic: history maps to alternating turns with tool_use and tool_result blocks", () => {
  const messages = toAnthropicMessages([
    { role: "user", content: "a" },
    {
      role: "assistant",
      content: "b",
      toolCalls: [
        { id: "t1", name: "bash", input: { command: "x" } },
        { id: "t2", name: "bash", input: {} },
      ],
    },
    { role: "tool", toolUseId: "t1", content: "r1", isError: false },
    { role: "tool", toolUseId: "t2", content: "r2", isError: true },
    { role: "user", content: "c" },
  ]);
  assert.deepEqual(messages, [
    { role: "user", content: [{ type: "text", text: "a" }] },
    {
      role: "assistant",
      content: [
        { type: "text", text: "b" },
        { type: "tool_use", id: "t1", name: "bash", input: { command: "x" } },
        { type: "tool_use", id: "t2", name: "bash", input: {} },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "t1", content: "r1" },
        { type: "tool_result", tool_use_id: "t2", content: "r2", is_error: true },
        { type: "text", text: "c" },
      ],
    },
  ]);
});
