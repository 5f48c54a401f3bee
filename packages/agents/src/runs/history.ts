import type { SessionEvent } from "../domain/model.ts";
import type { ModelMessage, ToolCall } from "../providers/provider.ts";

/**
 * Rebuilds the conversation the model sees from a session's event log:
 * client messages as they were sent, the model's text fragments and tool
 * calls joined into assistant turns, tool results as tool messages. A tool
 * call left without a result (its run was cancelled or failed) gets an error
 * result, since providers reject an unanswered tool call.
 */
export function historyOf(events: readonly SessionEvent[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  let open: Extract<ModelMessage, { role: "assistant" }> | undefined;
  const pending = new Set<string>();
  const settle = () => {
    for (const id of pending)
      out.push({ role: "tool", toolUseId: id, content: '{"error":"the tool call did not complete"}', isError: true });
    pending.clear();
  };
  for (const e of events) {
    switch (e.type) {
      case "user":
        settle();
        open = undefined;
        out.push({ role: "user", content: e.content });
        break;
      case "assistant":
        settle();
        open = undefined;
        out.push({ role: "assistant", content: e.content, toolCalls: [] });
        break;
      case "text":
        if (!open) {
          settle();
          open = { role: "assistant", content: "", toolCalls: [] };
          out.push(open);
        }
        open.content += e.content;
        break;
      case "tool_use": {
        if (!open) {
          settle();
          open = { role: "assistant", content: "", toolCalls: [] };
          out.push(open);
        }
        const parsed = parseToolUse(e.content);
        open.toolCalls.push({ id: e.toolUseId, name: parsed.name, input: parsed.input });
        pending.add(e.toolUseId);
        break;
      }
      case "tool_result":
      case "tool":
        pending.delete(e.toolUseId);
        open = undefined;
        out.push({ role: "tool", toolUseId: e.toolUseId, content: e.content, isError: e.isError });
        break;
      // A paused run's calls stay open: the resumed run writes their results next.
      case "requires_action":
        break;
      case "done":
      case "error":
      case "budget_reached":
        settle();
        open = undefined;
        break;
      // For clients only: the model gets the capped tool_result, and a
      // sandbox's pause, resume or replacement changes nothing it can see.
      case "tool_output":
      case "sandbox_paused":
      case "sandbox_resumed":
      case "sandbox_replaced":
      case "network_denied":
        break;
    }
  }
  settle();
  // An assistant turn that is only empty text adds nothing and some providers reject it.
  return out.filter((m) => m.role !== "assistant" || m.content !== "" || m.toolCalls.length > 0);
}

/** The tool calls `runId` made that have no result in the log yet, in the order it made them. */
export function openCallsOf(events: readonly SessionEvent[], runId: string): ToolCall[] {
  const open = new Map<string, ToolCall>();
  for (const e of events) {
    if (e.type === "tool_use" && e.runId === runId) {
      const parsed = parseToolUse(e.content);
      open.set(e.toolUseId, { id: e.toolUseId, name: parsed.name, input: parsed.input });
    } else if (e.type === "tool_result" || e.type === "tool") open.delete(e.toolUseId);
  }
  return [...open.values()];
}

/** The tool_use event's content: `{"name": ..., "input": {...}}`. */
export function toolUseContent(name: string, input: Record<string, unknown>): string {
  return JSON.stringify({ name, input });
}

function parseToolUse(content: string): { name: string; input: Record<string, unknown> } {
  try {
    const parsed = JSON.parse(content) as { name?: unknown; input?: unknown };
    const input =
      typeof parsed.input === "object" && parsed.input !== null ? (parsed.input as Record<string, unknown>) : {};
    return { name: typeof parsed.name === "string" ? parsed.name : "unknown", input };
  } catch {
    return { name: "unknown", input: {} };
  }
}
