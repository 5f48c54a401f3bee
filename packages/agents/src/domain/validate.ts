import { PlatformError } from "@platform/errors";
import type { MessageInput, SendMode, ToolDecision, ToolPermissions, ToolPolicy } from "./model.ts";

export const LIST_LIMIT_DEFAULT = 20;
export const LIST_LIMIT_MAX = 100;

// The platform's one UUID check (the id lower-cased, or INVALID_ARGUMENT naming the field).
export { requireUuid } from "@platform/errors";

export function requireText(field: string, value: string | undefined, maxLength = 256): string {
  if (!value || value.trim() === "") throw PlatformError.invalidArgument(`${field} is required`);
  if (value.length > maxLength) throw PlatformError.invalidArgument(`${field} is longer than ${maxLength} characters`);
  return value;
}

/** `limit` of a list call: absent → 20; outside 1..100 → invalid_argument. */
export function listLimit(limit: number | undefined): number {
  if (limit === undefined) return LIST_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) {
    throw PlatformError.invalidArgument(`limit must be between 1 and ${LIST_LIMIT_MAX}`);
  }
  return limit;
}

const ROLES = new Set(["user", "assistant", "tool"]);
/** Bound on one request's messages, so one call cannot flood the log. */
export const MAX_MESSAGES = 100;
export const MAX_MESSAGE_BYTES = 512 * 1024;

export function validateMessages(messages: readonly MessageInput[]): void {
  if (messages.length === 0) throw PlatformError.invalidArgument("messages is required and must not be empty");
  if (messages.length > MAX_MESSAGES)
    throw PlatformError.invalidArgument(`at most ${MAX_MESSAGES} messages per request`);
  messages.forEach((m, i) => {
    if (!ROLES.has(m.role)) throw PlatformError.invalidArgument(`messages[${i}].role must be user, assistant or tool`);
    if (Buffer.byteLength(m.content) > MAX_MESSAGE_BYTES) {
      throw PlatformError.invalidArgument(`messages[${i}].content is larger than ${MAX_MESSAGE_BYTES} bytes`);
    }
    if (m.role === "tool") {
      if (!m.toolUseId) throw PlatformError.invalidArgument(`messages[${i}].toolUseId is required when role is tool`);
    } else {
      if (m.toolUseId)
        throw PlatformError.invalidArgument(`messages[${i}].toolUseId is only allowed when role is tool`);
      if (m.isError) throw PlatformError.invalidArgument(`messages[${i}].isError is only allowed when role is tool`);
      if (m.content.trim() === "") throw PlatformError.invalidArgument(`messages[${i}].content is required`);
    }
  });
}

/** A send's `mode`: empty is `enqueue` (the default: a send during a run is queued, never refused). */
export function validateSendMode(mode: string): SendMode {
  if (mode === "") return "enqueue";
  if (mode === "enqueue" || mode === "reject" || mode === "interrupt") return mode;
  throw PlatformError.invalidArgument(
    `mode must be "enqueue", "reject" or "interrupt" (or absent: "enqueue"); got ${JSON.stringify(mode.slice(0, 64))}`,
  );
}

/** Bounds of an agent's tool policies: names as providers accept them (and MCP's `server.tool` prefixes). */
export const MAX_TOOL_PERMISSIONS = 64;
const TOOL_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/** `toolPermissions` of a create or update: each entry `allow` or `ask`, names bounded; INVALID_ARGUMENT names the entry. */
export function validateToolPermissions(input: Readonly<Record<string, string>>): ToolPermissions {
  const entries = Object.entries(input);
  if (entries.length > MAX_TOOL_PERMISSIONS)
    throw PlatformError.invalidArgument(`toolPermissions has more than ${MAX_TOOL_PERMISSIONS} entries`);
  const out: Record<string, ToolPolicy> = {};
  for (const [name, policy] of entries) {
    if (!TOOL_NAME.test(name))
      throw PlatformError.invalidArgument(
        `toolPermissions["${name.slice(0, 130)}"]: a tool name is 1 to 128 characters of A-Z a-z 0-9 _ . : -`,
      );
    if (policy !== "allow" && policy !== "ask")
      throw PlatformError.invalidArgument(
        `toolPermissions["${name}"] must be "allow" or "ask", not "${policy.slice(0, 64)}"`,
      );
    out[name] = policy;
  }
  return out;
}

export const MAX_DECISION_MESSAGE = 4096;

/** A decision as a request gives it: `result` answers a client tool's call. */
export type DecisionInput = {
  toolUseId: string;
  decision: string;
  message: string;
  result?: { content: string; isError: boolean };
};

/**
 * The decisions of one SubmitToolDecisions request: at least one, each a
 * distinct call, `allow` or `deny`, or a client tool's `result` (decision
 * empty or `result`).
 */
export function validateDecisions(decisions: readonly DecisionInput[]): ToolDecision[] {
  if (decisions.length === 0) throw PlatformError.invalidArgument("decisions is required and must not be empty");
  if (decisions.length > MAX_MESSAGES)
    throw PlatformError.invalidArgument(`at most ${MAX_MESSAGES} decisions per request`);
  const seen = new Set<string>();
  return decisions.map((d, i) => {
    if (!d.toolUseId) throw PlatformError.invalidArgument(`decisions[${i}].toolUseId is required`);
    if (seen.has(d.toolUseId))
      throw PlatformError.invalidArgument(`decisions[${i}].toolUseId ${d.toolUseId} is answered twice`);
    seen.add(d.toolUseId);
    if (d.result !== undefined) {
      if (d.decision !== "" && d.decision !== "result")
        throw PlatformError.invalidArgument(
          `decisions[${i}]: a result answers a client tool's call; its decision is empty or "result", not "${d.decision.slice(0, 64)}"`,
        );
      if (Buffer.byteLength(d.result.content) > MAX_MESSAGE_BYTES)
        throw PlatformError.invalidArgument(`decisions[${i}].result.content is larger than ${MAX_MESSAGE_BYTES} bytes`);
      return {
        toolUseId: d.toolUseId,
        decision: "result",
        message: "",
        result: { content: d.result.content, isError: d.result.isError },
      };
    }
    if (d.decision === "result")
      throw PlatformError.invalidArgument(`decisions[${i}].result is required when decision is "result"`);
    if (d.decision !== "allow" && d.decision !== "deny")
      throw PlatformError.invalidArgument(
        `decisions[${i}].decision must be "allow" or "deny" (or a result for a client tool's call)`,
      );
    if (d.message.length > MAX_DECISION_MESSAGE)
      throw PlatformError.invalidArgument(`decisions[${i}].message is longer than ${MAX_DECISION_MESSAGE} characters`);
    return { toolUseId: d.toolUseId, decision: d.decision, message: d.message };
  });
}
