import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { dataOnly, deadUrl, ReplayServer } from "../testing/replay-server.ts";
import { baseRequest, clientToolRequest, mcpToolRequest, modelProviderContract, type WireView } from "./contract.ts";
import { OpenAIProvider, toOpenAIMessages } from "./openai.ts";
import type { ModelEvent } from "./provider.ts";

// Chunks as Chat Completions streams them: `data: <chunk>` frames, a usage-only
// chunk with empty choices (stream_options.include_usage), then `data: [DONE]`.
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  dataOnly({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "gpt-test",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
const usage = (prompt: number, completion: number) =>
  dataOnly({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "gpt-test",
    choices: [],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  });
const done = dataOnly("[DONE]");
const toolDelta = (index: number, part: Record<string, unknown>) => chunk({ tool_calls: [{ index, ...part }] });

const textReply = [
  chunk({ role: "assistant", content: "" }),
  chunk({ content: "Hello" }),
  chunk({ content: ", world" }),
  chunk({}, "stop"),
  usage(21, 9),
  done,
];
const toolReply = [
  chunk({ role: "assistant", content: null }),
  toolDelta(0, { id: "call_abc", type: "function", function: { name: "bash", arguments: "" } }),
  toolDelta(0, { function: { arguments: '{"comm' } }),
  toolDelta(0, { function: { arguments: 'and":"ls -la"}' } }),
  chunk({}, "tool_calls"),
  usage(50, 18),
  done,
];

let server: ReplayServer;
before(async () => {
  server = new ReplayServer();
  await server.start();
});
after(() => server.stop());

const provider = (apiKey?: string) => new OpenAIProvider({ baseUrl: `${server.url}/v1`, apiKey });

modelProviderContract("openai", async (scenario) => {
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
          chunk({ role: "assistant", content: "" }),
          chunk({ content: "Partial" }),
          dataOnly({ error: { message: "upstream failed", type: "server_error" } }),
        ],
      });
      return { provider: provider(), request: baseRequest("hi") };
    case "abort":
      server.push({
        kind: "sse",
        frames: [...Array.from({ length: 50 }, (_, i) => chunk({ content: `w${i} ` })), chunk({}, "stop"), done],
      });
      return { provider: provider(), request: baseRequest("hi") };
    case "unreachable":
      return { provider: new OpenAIProvider({ baseUrl: await deadUrl() }), request: baseRequest("hi") };
    case "clientTool":
      server.push({
        kind: "sse",
        frames: [
          chunk({ role: "assistant", content: null }),
          toolDelta(0, { id: "call_pick", type: "function", function: { name: "pick_color", arguments: "" } }),
          toolDelta(0, { function: { arguments: '{"color":' } }),
          toolDelta(0, { function: { arguments: '"green"}' } }),
          chunk({}, "tool_calls"),
          usage(60, 12),
          done,
        ],
      });
      return { provider: provider(), request: clientToolRequest(), wire: () => wireOf(server.requests.at(-1)!.body) };
    case "mcpTool":
      server.push({
        kind: "sse",
        frames: [
          chunk({ role: "assistant", content: null }),
          toolDelta(0, { id: "call_new", type: "function", function: { name: "github__create_issue", arguments: "" } }),
          toolDelta(0, { function: { arguments: '{"title":"Crash on start",' } }),
          toolDelta(0, { function: { arguments: '"labels":["bug"]}' } }),
          chunk({}, "tool_calls"),
          usage(70, 14),
          done,
        ],
      });
      return { provider: provider(), request: mcpToolRequest(), wire: () => wireOf(server.requests.at(-1)!.body) };
  }
});

/** Chat Completions' shapes: tools as functions, calls in tool_calls, results as role "tool" messages. */
// biome-ignore lint/suspicious/noExplicitAny: the recorded request body, read as the API defines it
function wireOf(body: Record<string, any>): WireView {
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const messages = body.messages as any[];
  return {
    // biome-ignore lint/suspicious/noExplicitAny: as above
    tools: (body.tools as any[]).map((t) => ({
      name: t.function.name,
      description: t.function.description,
      inputSchema: t.function.parameters,
    })),
    calls: messages
      .filter((m) => m.role === "assistant")
      .flatMap((m) => m.tool_calls ?? [])
      // biome-ignore lint/suspicious/noExplicitAny: as above
      .map((c: any) => ({ id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) })),
    results: messages
      .filter((m) => m.role === "tool")
      .map((m) => ({ toolUseId: m.tool_call_id, content: m.content, isError: /^\{"error":/.test(m.content) })),
  };
}

async function drain(stream: AsyncIterable<ModelEvent>) {
  const out: ModelEvent[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

test("openai: parallel tool calls are assembled by index", async () => {
  server.push({
    kind: "sse",
    frames: [
      toolDelta(0, { id: "call_a", type: "function", function: { name: "bash", arguments: "" } }),
      toolDelta(1, { id: "call_b", type: "function", function: { name: "read_file", arguments: '{"pa' } }),
      toolDelta(0, { function: { arguments: '{"command":"pwd"}' } }),
      toolDelta(1, { function: { arguments: 'th":"a.txt"}' } }),
      chunk({}, "tool_calls"),
      usage(5, 6),
      done,
    ],
  });
  const events = await drain(await provider().start(baseRequest("x"), new AbortController().signal));
  assert.deepEqual(
    events.filter((e) => e.type === "tool_use").map((e) => (e as Extract<ModelEvent, { type: "tool_use" }>).call),
    [
      { id: "call_a", name: "bash", input: { command: "pwd" } },
      { id: "call_b", name: "read_file", input: { path: "a.txt" } },
    ],
  );
  assert.deepEqual(
    events.find((e) => e.type === "usage"),
    { type: "usage", inputTokens: 5, outputTokens: 6 },
  );
});

test("openai: request asks for usage, sends tools as functions, and Authorization only with a key", async () => {
  server.push({ kind: "sse", frames: textReply }, { kind: "sse", frames: textReply });
  await drain(await provider().start({ ...baseRequest("hi", "llama3"), system: "sys" }, new AbortController().signal));
  const anonymous = server.requests.at(-1)!;
  assert.equal(anonymous.path, "/v1/chat/completions");
  assert.equal(anonymous.headers.authorization, undefined);
  assert.deepEqual(anonymous.body.stream_options, { include_usage: true });
  assert.equal(anonymous.body.stream, true);
  assert.equal(anonymous.body.model, "llama3");
  assert.deepEqual((anonymous.body.messages as unknown[])[0], { role: "system", content: "sys" });
  assert.equal((anonymous.body.tools as Array<{ type: string; function: { name: string } }>)[0]!.function.name, "bash");
  await drain(await provider("sk-test").start(baseRequest("hi"), new AbortController().signal));
  assert.equal(server.requests.at(-1)!.headers.authorization, "Bearer sk-test");
});

test("openai: a usage chunk with choices null (vLLM) is accepted", async () => {
  server.push({
    kind: "sse",
    frames: [
      chunk({ content: "ok" }, "stop"),
      dataOnly({
        id: "x",
        object: "chat.completion.chunk",
        choices: null,
        usage: { prompt_tokens: 3, completion_tokens: 1 },
      }),
      done,
    ],
  });
  const events = await drain(await provider().start(baseRequest("hi"), new AbortController().signal));
  assert.deepEqual(
    events.find((e) => e.type === "usage"),
    { type: "usage", inputTokens: 3, outputTokens: 1 },
  );
});

test("openai: a stream cut before it finished is an error; an HTTP 401 before it is unavailable", async () => {
  server.push({ kind: "sse", frames: [chunk({ content: "Par" })], cut: true });
  const stream = await provider().start(baseRequest("hi"), new AbortController().signal);
  await assert.rejects(drain(stream));
  server.push({
    kind: "status",
    status: 401,
    body: { error: { message: "Incorrect API key provided", type: "invalid_request_error" } },
  });
  await assert.rejects(
    provider("bad").start(baseRequest("hi"), new AbortController().signal),
    /HTTP 401: Incorrect API key/,
  );
});

test("openai: history maps tool calls and tool results to the chat format", () => {
  assert.deepEqual(
    toOpenAIMessages("", [
      { role: "user", content: "a" },
      { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "bash", input: { command: "x" } }] },
      { role: "tool", toolUseId: "c1", content: "r", isError: false },
    ]),
    [
      { role: "user", content: "a" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"x"}' } }],
      },
      { role: "tool", tool_call_id: "c1", content: "r" },
    ],
  );
});

test("openai: an error result that does not say so is sent as {error}; one that does is sent as it is", () => {
  assert.deepEqual(
    toOpenAIMessages("", [
      { role: "tool", toolUseId: "c1", content: "the dialog was closed", isError: true },
      { role: "tool", toolUseId: "c2", content: '{"error":"denied"}', isError: true },
      { role: "tool", toolUseId: "c3", content: "fine", isError: false },
    ]),
    [
      { role: "tool", tool_call_id: "c1", content: '{"error":"the dialog was closed"}' },
      { role: "tool", tool_call_id: "c2", content: '{"error":"denied"}' },
      { role: "tool", tool_call_id: "c3", content: "fine" },
    ],
  );
});
