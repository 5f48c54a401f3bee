// The port behind which every model provider sits. A provider turns a
// conversation plus tool definitions into a stream of text fragments, tool
// calls and token usage. Providers know nothing of sessions or the log.

export type ToolSpec = {
  name: string;
  description: string;
  /** JSON Schema of the tool's input object. */
  inputSchema: Record<string, unknown>;
};

export type ToolCall = { id: string; name: string; input: Record<string, unknown> };

export type ModelMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; toolCalls: ToolCall[] }
  | { role: "tool"; toolUseId: string; content: string; isError: boolean };

export type ModelRequest = {
  /** The model name after the `provider/` prefix. */
  model: string;
  system: string;
  messages: ModelMessage[];
  tools: ToolSpec[];
  maxTokens: number;
};

export type ModelEvent =
  | { type: "text"; text: string }
  | { type: "tool_use"; call: ToolCall }
  /**
   * Token usage of this model call so far. Each value is the call's running
   * total, not an increment: the newest value replaces the previous one.
   */
  | { type: "usage"; inputTokens?: number; outputTokens?: number }
  | { type: "stop"; reason: string };

export interface ModelProvider {
  /**
   * Starts one model call. Resolves once the provider accepted the request
   * (HTTP headers received), so an unreachable provider is an error before
   * any event: PlatformError `unavailable`. Errors after that are thrown
   * from the iterator. The signal aborts the call.
   */
  start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>>;
}
