import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import type { ModelEvent, ModelProvider, ModelRequest } from "./provider.ts";

/**
 * What every model provider must do, scenario by scenario. The adapter's
 * test arranges each scenario (a replayed HTTP stream, or the dev model's
 * input syntax) and this suite checks the behaviour through the port only.
 */
export type Scenario =
  /** Replies with exactly `expectedText` and no tool call. */
  | "text"
  /** Replies with one `bash` tool call whose input is {"command": "ls -la"}. */
  | "tool"
  /** Streams some text, then fails. */
  | "midStreamError"
  /** Cannot be reached at all. */
  | "unreachable"
  /** Streams slowly enough that aborting mid-way is observable. */
  | "abort"
  /**
   * The request is clientToolRequest() (an agent's client tool offered next
   * to bash, and an earlier call of it answered with the client's error);
   * replies with one `pick_color` call whose input is {"color": "green"}.
   */
  | "clientTool"
  /**
   * The request is mcpToolRequest() (an MCP server's tool offered as
   * `<server>__<tool>`, an earlier call of it answered with the server's
   * isError result); replies with one `github__create_issue` call whose input
   * is {"title": "Crash on start", "labels": ["bug"]}.
   */
  | "mcpTool";

/**
 * What the adapter put on the wire, read back from the recorded request in
 * the provider's own format (tool definitions, the assistant's tool calls,
 * the tool results).
 */
export type WireView = {
  tools: { name: string; description: string; inputSchema: unknown }[];
  calls: { id: string; name: string; input: unknown }[];
  results: { toolUseId: string; content: string; isError: boolean }[];
};

export type Arranged = {
  provider: ModelProvider;
  request: ModelRequest;
  expectedText?: string;
  /** The last request as sent (adapters that speak HTTP). */
  wire?: () => WireView;
  cleanup?: () => Promise<void>;
};

/** Returns undefined when a scenario cannot apply (it is skipped with the reason). */
export type ArrangeScenario = (scenario: Scenario) => Promise<Arranged | { skip: string }>;

export function baseRequest(content: string, model = "test-model"): ModelRequest {
  return {
    model,
    system: "",
    messages: [{ role: "user", content }],
    tools: [
      {
        name: "bash",
        description: "run a command",
        inputSchema: { type: "object", properties: { command: { type: "string" } } },
      },
    ],
    maxTokens: 256,
  };
}

/** A client tool as an agent declares it: nested properties, an enum, a required field. */
export const CLIENT_TOOL = {
  name: "pick_color",
  description: "Ask the user to pick a color.",
  inputSchema: {
    type: "object",
    properties: {
      color: { type: "string", enum: ["red", "green", "blue"] },
      shade: { type: "object", properties: { level: { type: "integer", minimum: 1 } } },
    },
    required: ["color"],
    additionalProperties: false,
  },
};

/** The request of the clientTool scenario: the client tool offered, one earlier call of it failed on the client. */
export function clientToolRequest(model = "test-model"): ModelRequest {
  const request = baseRequest("pick a color", model);
  request.tools.push(CLIENT_TOOL);
  request.messages.push(
    { role: "assistant", content: "", toolCalls: [{ id: "call_prev", name: "pick_color", input: { color: "red" } }] },
    { role: "tool", toolUseId: "call_prev", content: "the dialog was closed", isError: true },
    { role: "user", content: "try again" },
  );
  return request;
}

/** An MCP server's tool as a run offers it: `<server>__<tool>`, the schema as the server listed it. */
export const MCP_TOOL = {
  name: "github__create_issue",
  description: "Create an issue in the repository.",
  inputSchema: {
    type: "object",
    properties: {
      title: { type: "string", minLength: 3 },
      labels: { type: "array", items: { type: "string" } },
    },
    required: ["title"],
    additionalProperties: false,
  },
};

/** The request of the mcpTool scenario: the MCP tool offered, one earlier call of it failed on the server. */
export function mcpToolRequest(model = "test-model"): ModelRequest {
  const request = baseRequest("file the bug", model);
  request.tools.push(MCP_TOOL);
  request.messages.push(
    { role: "assistant", content: "", toolCalls: [{ id: "call_mcp", name: MCP_TOOL.name, input: { title: "x" } }] },
    { role: "tool", toolUseId: "call_mcp", content: "title is too short", isError: true },
    { role: "user", content: "try again" },
  );
  return request;
}

async function drain(stream: AsyncIterable<ModelEvent>): Promise<ModelEvent[]> {
  const out: ModelEvent[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

function lastUsage(events: ModelEvent[]) {
  const usage = events.filter((e) => e.type === "usage");
  return usage.at(-1) as Extract<ModelEvent, { type: "usage" }> | undefined;
}

export function modelProviderContract(name: string, arrange: ArrangeScenario): void {
  const run = (scenario: Scenario, title: string, body: (a: Arranged) => Promise<void>) =>
    test(`${name} contract: ${title}`, async (t) => {
      const arranged = await arrange(scenario);
      if ("skip" in arranged) return t.skip(arranged.skip);
      try {
        await body(arranged);
      } finally {
        await arranged.cleanup?.();
      }
    });

  run(
    "text",
    "a text reply streams as text events, with usage and a stop",
    async ({ provider, request, expectedText }) => {
      const events = await drain(await provider.start(request, new AbortController().signal));
      const text = events.filter((e) => e.type === "text");
      assert.ok(text.length > 0);
      if (expectedText !== undefined) assert.equal(text.map((e) => e.text).join(""), expectedText);
      assert.equal(events.filter((e) => e.type === "tool_use").length, 0);
      const usage = lastUsage(events);
      assert.ok(
        usage && (usage.inputTokens ?? 0) > 0 && (usage.outputTokens ?? 0) > 0,
        "usage with input and output tokens",
      );
      assert.equal(events.at(-1)?.type, "stop");
    },
  );

  run("tool", "a tool call arrives whole, with its parsed input", async ({ provider, request }) => {
    const events = await drain(await provider.start(request, new AbortController().signal));
    const calls = events.filter((e) => e.type === "tool_use");
    assert.equal(calls.length, 1);
    const call = (calls[0] as Extract<ModelEvent, { type: "tool_use" }>).call;
    assert.equal(call.name, "bash");
    assert.deepEqual(call.input, { command: "ls -la" });
    assert.ok(call.id.length > 0);
    assert.ok((lastUsage(events)?.outputTokens ?? 0) > 0);
  });

  run(
    "midStreamError",
    "a failure after the stream started is thrown by the iterator after the partial text",
    async ({ provider, request }) => {
      const stream = await provider.start(request, new AbortController().signal);
      const seen: ModelEvent[] = [];
      await assert.rejects(async () => {
        for await (const e of stream) seen.push(e);
      });
      assert.ok(
        seen.some((e) => e.type === "text"),
        "partial text came first",
      );
    },
  );

  run("unreachable", "an unreachable provider fails start() with unavailable", async ({ provider, request }) => {
    await assert.rejects(provider.start(request, new AbortController().signal), (err: unknown) => {
      assert.ok(err instanceof PlatformError);
      assert.equal(err.code, Code.Unavailable);
      return true;
    });
  });

  run(
    "clientTool",
    "a client tool travels in the provider's format: its definition, the model's call of it, the client's error result",
    async ({ provider, request, wire }) => {
      const events = await drain(await provider.start(request, new AbortController().signal));
      const calls = events.filter((e) => e.type === "tool_use");
      assert.equal(calls.length, 1);
      const call = (calls[0] as Extract<ModelEvent, { type: "tool_use" }>).call;
      assert.equal(call.name, "pick_color");
      assert.deepEqual(call.input, { color: "green" });
      assert.ok(call.id.length > 0);
      if (!wire) return;
      const sent = wire();
      assert.deepEqual(
        sent.tools.find((t) => t.name === CLIENT_TOOL.name),
        CLIENT_TOOL,
        "the definition with its schema, unchanged",
      );
      assert.ok(
        sent.tools.some((t) => t.name === "bash"),
        "next to the built-in tools",
      );
      assert.deepEqual(sent.calls, [{ id: "call_prev", name: "pick_color", input: { color: "red" } }]);
      assert.equal(sent.results.length, 1);
      assert.equal(sent.results[0]!.toolUseId, "call_prev");
      assert.match(sent.results[0]!.content, /the dialog was closed/);
      assert.equal(sent.results[0]!.isError, true, "the client's error stays an error");
    },
  );

  run(
    "mcpTool",
    "an MCP tool travels in the provider's format: its prefixed name and schema, the model's call of it, the server's error result",
    async ({ provider, request, wire }) => {
      const events = await drain(await provider.start(request, new AbortController().signal));
      const calls = events.filter((e) => e.type === "tool_use");
      assert.equal(calls.length, 1);
      const call = (calls[0] as Extract<ModelEvent, { type: "tool_use" }>).call;
      assert.equal(call.name, MCP_TOOL.name);
      assert.deepEqual(call.input, { title: "Crash on start", labels: ["bug"] });
      if (!wire) return;
      const sent = wire();
      assert.deepEqual(
        sent.tools.find((t) => t.name === MCP_TOOL.name),
        MCP_TOOL,
        "the definition with its schema, unchanged",
      );
      assert.deepEqual(sent.calls, [{ id: "call_mcp", name: MCP_TOOL.name, input: { title: "x" } }]);
      assert.equal(sent.results.length, 1);
      assert.equal(sent.results[0]!.toolUseId, "call_mcp");
      assert.match(sent.results[0]!.content, /title is too short/);
      assert.equal(sent.results[0]!.isError, true, "the server's isError stays an error");
    },
  );

  run("abort", "aborting the signal ends the stream", async ({ provider, request }) => {
    const abort = new AbortController();
    const stream = await provider.start(request, abort.signal);
    const seen: ModelEvent[] = [];
    try {
      for await (const e of stream) {
        seen.push(e);
        if (e.type === "text") abort.abort();
      }
    } catch {
      // ending by throwing is fine
    }
    assert.ok(seen.filter((e) => e.type === "text").length <= 2, "stopped soon after the abort");
    assert.equal(
      seen.some((e) => e.type === "stop"),
      false,
    );
  });
}
