// One shape for a session's events, whether read from its log (the generated
// SessionEvent) or streamed (the SDK's ChatEvent), and the chat items they make.
import type { ChatEvent, SessionEvent } from "@platform/client";

export interface ViewEvent {
  seq: number;
  type: string;
  content: string;
  toolUseId: string;
  isError: boolean;
  name?: string;
  input?: Record<string, unknown>;
  stdout?: string;
  stderr?: string;
  tokensIn?: number;
  tokensOut?: number;
}

function json(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** An event of the log (GET /v1/sessions/{id}). */
export function fromLog(m: SessionEvent): ViewEvent {
  const e: ViewEvent = {
    seq: Number(m.seq),
    type: m.type,
    content: m.content,
    toolUseId: m.toolUseId,
    isError: m.isError,
    tokensIn: Number(m.tokensIn),
    tokensOut: Number(m.tokensOut),
  };
  if (m.type === "tool_use") {
    const o = json(m.content);
    e.name = typeof o.name === "string" ? o.name : "";
    e.input = o.input && typeof o.input === "object" ? (o.input as Record<string, unknown>) : {};
  }
  if (m.type === "tool_output") {
    const o = json(m.content);
    if (typeof o.stdout === "string") e.stdout = o.stdout;
    if (typeof o.stderr === "string") e.stderr = o.stderr;
  }
  return e;
}

/** An event of a reply stream (the SDK's send() or events()). */
export function fromStream(c: ChatEvent): ViewEvent {
  const base = { seq: c.seq, content: "", toolUseId: "", isError: false };
  switch (c.type) {
    case "text":
      return { ...base, type: "text", content: c.content };
    case "tool_use":
      return { ...base, type: "tool_use", toolUseId: c.toolUseId, name: c.name, input: c.input };
    case "tool_output":
      return { ...base, type: "tool_output", toolUseId: c.toolUseId, stdout: c.stdout, stderr: c.stderr };
    case "tool_result":
      return { ...base, type: "tool_result", toolUseId: c.toolUseId, content: c.content, isError: c.isError };
    case "done":
      return { ...base, type: "done", tokensIn: c.tokensIn, tokensOut: c.tokensOut };
    case "error":
      return { ...base, type: "error", content: c.content };
    case "other":
      return { ...base, type: c.name, content: c.content, toolUseId: c.toolUseId, isError: c.isError };
    default:
      return { ...base, type: c.type, toolUseId: c.toolUseId, content: JSON.stringify(c.details) };
  }
}

export interface ToolItem {
  kind: "tool";
  seq: number;
  toolUseId: string;
  name: string;
  input: Record<string, unknown>;
  stdout: string;
  stderr: string;
  result?: { content: string; isError: boolean; exitCode?: number };
}
export interface PendingCall {
  toolUseId: string;
  name: string;
  input: unknown;
  kind?: string;
}
export type ChatItem =
  | { kind: "user"; seq: number; text: string }
  | { kind: "assistant"; seq: number; text: string }
  | ToolItem
  | { kind: "done"; seq: number; tokensIn: number; tokensOut: number }
  | { kind: "error"; seq: number; text: string }
  | { kind: "action"; seq: number; calls: PendingCall[] }
  | { kind: "note"; seq: number; text: string };

/** The chat as items, from events in seq order (each seq once). */
export function chatItems(events: ViewEvent[]): ChatItem[] {
  const items: ChatItem[] = [];
  const tools = new Map<string, ToolItem>();
  for (const e of events) {
    const last = items.at(-1);
    switch (e.type) {
      case "user":
        items.push({ kind: "user", seq: e.seq, text: e.content });
        break;
      case "text":
        if (last?.kind === "assistant") last.text += e.content;
        else items.push({ kind: "assistant", seq: e.seq, text: e.content });
        break;
      case "tool_use": {
        const t: ToolItem = {
          kind: "tool",
          seq: e.seq,
          toolUseId: e.toolUseId,
          name: e.name ?? "",
          input: e.input ?? {},
          stdout: "",
          stderr: "",
        };
        tools.set(e.toolUseId, t);
        items.push(t);
        break;
      }
      case "tool_output": {
        const t = tools.get(e.toolUseId);
        if (t) {
          t.stdout += e.stdout ?? "";
          t.stderr += e.stderr ?? "";
        }
        break;
      }
      case "tool_result": {
        const t = tools.get(e.toolUseId);
        if (!t) break;
        const o = json(e.content);
        t.result = {
          content: e.content,
          isError: e.isError,
          exitCode: typeof o.exitCode === "number" ? o.exitCode : undefined,
        };
        // The result holds the whole output; the streamed chunks were a preview of it.
        if (typeof o.stdout === "string") t.stdout = o.stdout;
        if (typeof o.stderr === "string") t.stderr = o.stderr;
        break;
      }
      case "done":
        items.push({ kind: "done", seq: e.seq, tokensIn: e.tokensIn ?? 0, tokensOut: e.tokensOut ?? 0 });
        break;
      case "error":
        items.push({ kind: "error", seq: e.seq, text: e.content });
        break;
      case "requires_action": {
        const calls = (json(e.content).calls as PendingCall[] | undefined) ?? [];
        items.push({ kind: "action", seq: e.seq, calls });
        break;
      }
      case "message_queued": {
        // A send made during a run: its messages come again as user events when a run takes it.
        const mode = json(e.content).mode === "interrupt" ? "interrupting the run" : "queued";
        items.push({ kind: "note", seq: e.seq, text: `message sent while the agent worked (${mode})` });
        break;
      }
      case "assistant":
      case "tool":
        break;
      default:
        items.push({ kind: "note", seq: e.seq, text: `${e.type.replaceAll("_", " ")}` });
    }
  }
  return items;
}

/** Adds events to a list by seq, keeping it ordered and each seq once. */
export function merge(into: ViewEvent[], more: ViewEvent[]): ViewEvent[] {
  const bySeq = new Map(into.map((e) => [e.seq, e]));
  for (const e of more) if (!bySeq.has(e.seq)) bySeq.set(e.seq, e);
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq);
}
