import { PlatformError } from "@platform/errors";
import { postForStream } from "./http.ts";
import type { ModelEvent, ModelMessage, ModelProvider, ModelRequest, ToolCall } from "./provider.ts";
import { eventJson, readSse } from "./sse-reader.ts";

export type AnthropicOptions = { apiKey: string; baseUrl?: string; version?: string };

/**
 * `anthropic/...`: the Messages API with `stream: true` and tools.
 * Usage: input tokens come from message_start; output tokens from
 * message_delta, whose value is the running total (so it replaces, never
 * adds to, the earlier one).
 */
export class AnthropicProvider implements ModelProvider {
  readonly #url: string;
  constructor(private readonly options: AnthropicOptions) {
    this.#url = `${(options.baseUrl ?? "https://api.anthropic.com").replace(/\/+$/, "")}/v1/messages`;
  }

  async start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    const response = await postForStream(
      "anthropic",
      this.#url,
      { "x-api-key": this.options.apiKey, "anthropic-version": this.options.version ?? "2023-06-01" },
      {
        model: request.model,
        max_tokens: request.maxTokens,
        stream: true,
        ...(request.system ? { system: request.system } : {}),
        messages: toAnthropicMessages(request.messages),
        ...(request.tools.length > 0
          ? {
              tools: request.tools.map((t) => ({
                name: t.name,
                description: t.description,
                input_schema: t.inputSchema,
              })),
            }
          : {}),
      },
      signal,
    );
    return parse(response.body!, signal);
  }
}

type Block = { kind: "text" } | { kind: "tool_use"; id: string; name: string; json: string } | { kind: "other" };

async function* parse(body: AsyncIterable<Uint8Array>, signal: AbortSignal): AsyncGenerator<ModelEvent> {
  const blocks = new Map<number, Block>();
  let inputTokens = 0;
  let outputTokens = 0;
  let stopped = false;
  for await (const { data } of readSse(body)) {
    // Frames already buffered must not outlive an abort.
    if (signal.aborted) throw signal.reason;
    const msg = eventJson(data, "anthropic sent a malformed stream event");
    switch (msg.type) {
      case "message_start": {
        const usage = msg.message?.usage ?? {};
        inputTokens =
          tokens(usage.input_tokens) +
          tokens(usage.cache_creation_input_tokens) +
          tokens(usage.cache_read_input_tokens);
        outputTokens = tokens(usage.output_tokens);
        yield { type: "usage", inputTokens, outputTokens };
        break;
      }
      case "content_block_start": {
        const block = msg.content_block ?? {};
        if (block.type === "text") {
          blocks.set(msg.index, { kind: "text" });
          if (block.text) yield { type: "text", text: block.text };
        } else if (block.type === "tool_use") {
          blocks.set(msg.index, { kind: "tool_use", id: block.id, name: block.name, json: "" });
        } else {
          blocks.set(msg.index, { kind: "other" });
        }
        break;
      }
      case "content_block_delta": {
        const block = blocks.get(msg.index);
        const delta = msg.delta ?? {};
        if (delta.type === "text_delta" && delta.text) yield { type: "text", text: delta.text };
        else if (delta.type === "input_json_delta" && block?.kind === "tool_use")
          block.json += delta.partial_json ?? "";
        break;
      }
      case "content_block_stop": {
        const block = blocks.get(msg.index);
        if (block?.kind === "tool_use") yield { type: "tool_use", call: toolCall(block) };
        blocks.delete(msg.index);
        break;
      }
      case "message_delta": {
        // Running totals: the latest value stands for the whole call.
        const usage = msg.usage ?? {};
        if (usage.output_tokens !== undefined) outputTokens = tokens(usage.output_tokens);
        if (usage.input_tokens !== undefined) {
          inputTokens =
            tokens(usage.input_tokens) +
            tokens(usage.cache_creation_input_tokens) +
            tokens(usage.cache_read_input_tokens);
        }
        yield { type: "usage", inputTokens, outputTokens };
        if (msg.delta?.stop_reason) yield { type: "stop", reason: msg.delta.stop_reason };
        break;
      }
      case "message_stop":
        stopped = true;
        break;
      case "error":
        throw PlatformError.unavailable(
          `anthropic stream error: ${msg.error?.type ?? "error"}: ${msg.error?.message ?? ""}`.trim(),
        );
      default:
        // ping and event types added later are ignored
        break;
    }
    if (stopped) return;
  }
  throw PlatformError.unavailable("anthropic stream ended before message_stop");
}

function toolCall(block: { id: string; name: string; json: string }): ToolCall {
  let input: unknown = {};
  if (block.json.trim() !== "") {
    try {
      input = JSON.parse(block.json);
    } catch {
      input = { _unparsed: block.json };
    }
  }
  return { id: block.id, name: block.name, input: isObject(input) ? input : { value: input } };
}

/**
 * The Messages API wants alternating user/assistant turns; tool results are
 * user-turn blocks. Consecutive messages of one side are merged.
 */
export function toAnthropicMessages(
  messages: ModelMessage[],
): Array<{ role: "user" | "assistant"; content: unknown[] }> {
  const out: Array<{ role: "user" | "assistant"; content: unknown[] }> = [];
  const push = (role: "user" | "assistant", blocks: unknown[]) => {
    if (blocks.length === 0) return;
    const last = out.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", [{ type: "text", text: m.content }]);
    else if (m.role === "tool") {
      push("user", [
        { type: "tool_result", tool_use_id: m.toolUseId, content: m.content, ...(m.isError ? { is_error: true } : {}) },
      ]);
    } else {
      push("assistant", [
        ...(m.content ? [{ type: "text", text: m.content }] : []),
        ...m.toolCalls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.input })),
      ]);
    }
  }
  return out;
}

function tokens(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
