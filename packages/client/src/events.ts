import type { SessionEvent as SessionEventMessage } from "@platform/gen/agents/v1/agents_pb";

interface Base {
  /** The event's sequence number in the session's log: its SSE id, what a resume continues after. */
  seq: number;
}

/** A streamed text fragment of the model's reply. */
export interface TextEvent extends Base {
  type: "text";
  content: string;
}
/** The model asked for a tool call (`bash`, `read_file`, `write_file`, `list_files`). */
export interface ToolUseEvent extends Base {
  type: "tool_use";
  toolUseId: string;
  name: string;
  input: Record<string, unknown>;
}
/** A chunk of a running tool's output (additive event type). */
export interface ToolOutputEvent extends Base {
  type: "tool_output";
  toolUseId: string;
  stdout?: string;
  stderr?: string;
  droppedBytes?: number;
  truncated?: boolean;
}
/** The tool call's result, fed back to the model. */
export interface ToolResultEvent extends Base {
  type: "tool_result";
  toolUseId: string;
  content: string;
  isError: boolean;
}
/** The run ended; cumulative token counts. Terminal. */
export interface DoneEvent extends Base {
  type: "done";
  tokensIn: number;
  tokensOut: number;
}
/** The run failed or was cancelled; `content` is a human-readable message. Terminal. */
export interface ErrorEvent extends Base {
  type: "error";
  content: string;
}
/** What happened to the session's sandbox before a tool call (additive event types). */
export interface SandboxEvent extends Base {
  type: "sandbox_paused" | "sandbox_resumed" | "sandbox_replaced";
  toolUseId: string;
  details: Record<string, unknown>;
}
/** An event type this client does not know (the log's `user`/`assistant`/`tool` messages, newer types). */
export interface OtherEvent extends Base {
  type: "other";
  /** The event's own type. */
  name: string;
  content: string;
  toolUseId: string;
  isError: boolean;
}

/** One event of a session's stream, typed by `type`. */
export type ChatEvent =
  | TextEvent
  | ToolUseEvent
  | ToolOutputEvent
  | ToolResultEvent
  | DoneEvent
  | ErrorEvent
  | SandboxEvent
  | OtherEvent;

/** Whether the run's stream ends with this event. */
export function isTerminal(e: ChatEvent): e is DoneEvent | ErrorEvent {
  return e.type === "done" || e.type === "error";
}

function objectOf(content: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(content);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The generated SessionEvent message as a typed event. */
export function toChatEvent(m: SessionEventMessage): ChatEvent {
  const seq = Number(m.seq);
  switch (m.type) {
    case "text":
      return { type: "text", seq, content: m.content };
    case "tool_use": {
      const o = objectOf(m.content);
      const input = o.input && typeof o.input === "object" ? (o.input as Record<string, unknown>) : {};
      return { type: "tool_use", seq, toolUseId: m.toolUseId, name: typeof o.name === "string" ? o.name : "", input };
    }
    case "tool_output": {
      const o = objectOf(m.content);
      const e: ToolOutputEvent = { type: "tool_output", seq, toolUseId: m.toolUseId };
      if (typeof o.stdout === "string") e.stdout = o.stdout;
      if (typeof o.stderr === "string") e.stderr = o.stderr;
      if (typeof o.droppedBytes === "number") e.droppedBytes = o.droppedBytes;
      if (typeof o.truncated === "boolean") e.truncated = o.truncated;
      return e;
    }
    case "tool_result":
      return { type: "tool_result", seq, toolUseId: m.toolUseId, content: m.content, isError: m.isError };
    case "done":
      return { type: "done", seq, tokensIn: Number(m.tokensIn), tokensOut: Number(m.tokensOut) };
    case "error":
      return { type: "error", seq, content: m.content };
    case "sandbox_paused":
    case "sandbox_resumed":
    case "sandbox_replaced":
      return { type: m.type, seq, toolUseId: m.toolUseId, details: objectOf(m.content) };
    default:
      return { type: "other", seq, name: m.type, content: m.content, toolUseId: m.toolUseId, isError: m.isError };
  }
}
