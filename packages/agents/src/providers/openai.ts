import { PlatformError } from "@platform/errors";
import { postForStream } from "./http.ts";
import type { ModelEvent, ModelMessage, ModelProvider, ModelRequest, ToolCall } from "./provider.ts";
import { eventJson, readSse } from "./sse-reader.ts";

export type OpenAIOptions = {
  /** e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1 (Ollama), a vLLM or llama.cpp server. */
  baseUrl?: string;
  /** Optional: local servers need none. */
  apiKey?: string;
};

/**
 * `openai/...`: the Chat Completions streaming API as OpenAI, Ollama, vLLM
 * and llama.cpp's server speak it. Tool calls arrive in fragments keyed by
 * `index` and are assembled here; usage comes from the final chunk requested
 * with `stream_options.include_usage`.
 */
export class OpenAIProvider implements ModelProvider {
  readonly #url: string;
  constructor(private readonly options: OpenAIOptions = {}) {
    this.#url = `${(options.baseUrl ?? "https://api.openai.com/v1").replace(/\/+$/, "")}/chat/completions`;
  }

  async start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    const response = await postForStream(
      "openai",
      this.#url,
      this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {},
      {
        model: request.model,
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: request.maxTokens,
        messages: toOpenAIMessages(request.system, request.messages),
        ...(request.tools.length > 0
          ? {
              tools: request.tools.map((t) => ({
                type: "function",
                function: { name: t.name, description: t.description, parameters: t.inputSchema },
              })),
            }
          : {}),
      },
      signal,
    );
    return parse(response.body!, signal);
  }
}

type PendingCall = { id: string; name: string; args: string };

async function* parse(body: AsyncIterable<Uint8Array>, signal: AbortSignal): AsyncGenerator<ModelEvent> {
  const calls = new Map<number, PendingCall>();
  let finish = "";
  let done = false;
  for await (const { data } of readSse(body)) {
    // Frames already buffered must not outlive an abort.
    if (signal.aborted) throw signal.reason;
    if (data.trim() === "[DONE]") {
      done = true;
      break;
    }
    const chunk = eventJson(data, "openai sent a malformed stream chunk");
    if (chunk.error) {
      const e = chunk.error;
      throw PlatformError.unavailable(
        `openai stream error: ${typeof e === "string" ? e : (e.message ?? e.type ?? "error")}`,
      );
    }
    // Some servers (vLLM) send `choices: null` on the usage-only chunk.
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (typeof delta.content === "string" && delta.content !== "") yield { type: "text", text: delta.content };
      for (const part of delta.tool_calls ?? []) {
        const index = typeof part.index === "number" ? part.index : calls.size;
        const call = calls.get(index) ?? { id: "", name: "", args: "" };
        if (part.id) call.id = part.id;
        if (part.function?.name) call.name += part.function.name;
        if (part.function?.arguments) call.args += part.function.arguments;
        calls.set(index, call);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    if (chunk.usage) {
      yield {
        type: "usage",
        inputTokens: chunk.usage.prompt_tokens ?? 0,
        outputTokens: chunk.usage.completion_tokens ?? 0,
      };
    }
  }
  if (!done && !finish) throw PlatformError.unavailable("openai stream ended before it finished");
  for (const [index, call] of [...calls.entries()].sort((a, b) => a[0] - b[0])) {
    yield { type: "tool_use", call: toToolCall(call, index) };
  }
  yield { type: "stop", reason: finish || "stop" };
}

function toToolCall(call: PendingCall, index: number): ToolCall {
  let input: unknown = {};
  if (call.args.trim() !== "") {
    try {
      input = JSON.parse(call.args);
    } catch {
      input = { _unparsed: call.args };
    }
  }
  const object = typeof input === "object" && input !== null && !Array.isArray(input);
  return {
    id: call.id || `call_${index}`,
    name: call.name,
    input: object ? (input as Record<string, unknown>) : { value: input },
  };
}

/**
 * A tool message's content. Chat Completions has no error flag on tool
 * results: an error whose content does not already say so (a client
 * tool's own text) is sent as {"error": <content>}, the shape the built-in
 * tools' errors have.
 */
function toolContent(m: Extract<ModelMessage, { role: "tool" }>): string {
  if (!m.isError || saysError(m.content)) return m.content;
  return JSON.stringify({ error: m.content });
}

function saysError(content: string): boolean {
  try {
    const parsed = JSON.parse(content) as unknown;
    return typeof parsed === "object" && parsed !== null && "error" in parsed;
  } catch {
    return false;
  }
}

export function toOpenAIMessages(system: string, messages: ModelMessage[]): unknown[] {
  const out: unknown[] = system ? [{ role: "system", content: system }] : [];
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.toolUseId, content: toolContent(m) });
    else {
      out.push({
        role: "assistant",
        content: m.content || null,
        ...(m.toolCalls.length > 0
          ? {
              tool_calls: m.toolCalls.map((c) => ({
                id: c.id,
                type: "function",
                function: { name: c.name, arguments: JSON.stringify(c.input) },
              })),
            }
          : {}),
      });
    }
  }
  return out;
}
