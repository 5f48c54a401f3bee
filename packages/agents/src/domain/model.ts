// The agents domain's own shapes. The server maps them to the generated
// proto messages; nothing here knows a transport.

import type { NetworkPolicy } from "@platform/network-policy";
import type { Budgets } from "./usage.ts";

/** Who is calling, as resolved by identity. Every query is scoped to orgId. */
export type AuthContext = {
  userId: string;
  orgId: string;
  /** `jwt_session` or `api_key:<prefix>`, for logs. */
  method: string;
  /** An API key's scopes; absent for a JWT (a person), whom scopes do not limit. */
  scopes?: readonly string[];
};

export type Agent = {
  id: string;
  orgId: string;
  name: string;
  slug: string;
  model: string;
  systemPrompt: string;
  /** Tool name → policy; a tool not named is `allow`. */
  toolPermissions: ToolPermissions;
  /** Remote MCP servers whose tools the model is offered as `<server>__<tool>`. */
  mcpServers: readonly McpServer[];
  /** Tools the client runs: a call pauses the run until the client posts the result. */
  clientTools: readonly ClientTool[];
  /** Limits on each of its sessions' usage (domain/usage.ts); empty: none. */
  budgets: Budgets;
  /** What its sessions' sandboxes may reach (compute's egress proxy); absent: no network. */
  networkPolicy?: NetworkPolicy;
  /** Its sessions' sandbox image (compute's); absent: compute's default. */
  image?: string;
  createdAt: Date;
  updatedAt: Date;
};

/**
 * A remote MCP server of an agent (Streamable HTTP). `sealedHeaders`: its
 * header values, encrypted (tools/mcp/secrets.ts); never returned by the API.
 */
export type McpServer = { name: string; url: string; headerNames: string[]; sealedHeaders?: string };

/** `allow`: the tool's calls run as the model makes them; `ask`: each waits for a person's answer. */
export type ToolPolicy = "allow" | "ask";
export type ToolPermissions = Readonly<Record<string, ToolPolicy>>;

/** A tool the client runs itself; its input schema is a JSON Schema object (checked with Ajv when set). */
export type ClientTool = { name: string; description: string; inputSchema: Record<string, unknown> };

/**
 * A tool call waiting for an answer: named by a `requires_action` event.
 * `kind` `client`: a client tool's call, answered with its result.
 */
export type PendingCall = { toolUseId: string; name: string; input: Record<string, unknown>; kind?: "client" };

/**
 * A person's answer to one pending call: allow or deny; or, for a client
 * tool's call, `result` with what the tool returned (`content`, `isError`).
 */
export type ToolDecision = {
  toolUseId: string;
  decision: "allow" | "deny" | "result";
  message: string;
  result?: { content: string; isError: boolean };
};

/**
 * A session whose last run paused on tool calls: its log ends with the
 * `requires_action` event at `seq`, written by `runId`.
 */
export type Waiting = {
  seq: number;
  runId: string;
  calls: PendingCall[];
  /** The answers recorded so far, by tool use id. */
  decisions: Map<string, ToolDecision>;
};

export type SessionStatus = "idle" | "running";

export type Session = {
  id: string;
  orgId: string;
  agentId: string;
  status: SessionStatus;
  /** Run holding the session, when running. */
  activeRunId?: string;
  /**
   * A run whose lease lapsed before it ended (its replica died): the session
   * is idle, and the run gets its closing events from whoever sees it next
   * (runs/reaper.ts).
   */
  lapsedRunId?: string;
  lastSeq: number;
  sandboxId?: string;
  /** The session's own budgets, when the read had them (they replace the agent's field by field). */
  budgets?: Budgets;
  createdAt: Date;
  updatedAt: Date;
};

/**
 * Types of log entries produced by a run. `done` and `error` end a run.
 * `tool_output` (a running tool's output, see runs/tool-output.ts) and the
 * sandbox events (see domain/session-sandbox.ts) are additions to the
 * specification's five; clients that do not know them skip them, and the
 * model never sees them (runs/history.ts).
 */
export type StreamEventType =
  | "text"
  | "tool_use"
  | "tool_output"
  | "tool_result"
  | "done"
  | "error"
  | "sandbox_paused"
  | "sandbox_resumed"
  | "sandbox_replaced"
  | "requires_action"
  | "message_queued"
  | "budget_reached"
  | "network_denied";
/** Types of log entries written from the client's messages. */
export type MessageRole = "user" | "assistant" | "tool";
export type EventType = StreamEventType | MessageRole;

/**
 * The events that end a run (and free the session). `requires_action` ends
 * a run that paused on tool calls a person must answer: the run that
 * resumes it after the answers is a new one. `budget_reached` ends a run
 * that reached one of the session's budgets (domain/usage.ts).
 */
export const TERMINAL_TYPES: ReadonlySet<string> = new Set(["done", "error", "requires_action", "budget_reached"]);

/** One element of a session's event log. */
export type SessionEvent = {
  seq: number;
  type: EventType;
  content: string;
  tokensIn: number;
  tokensOut: number;
  toolUseId: string;
  isError: boolean;
  createdAt: Date;
  /** The run that wrote it (internal: not part of the API). */
  runId?: string;
  /** On a message a run took from the queue: the seq of its `message_queued` event. */
  queuedSeq?: number;
};

/** An event before the log gave it a seq and a time. */
export type NewEvent = {
  type: EventType;
  content?: string;
  tokensIn?: number;
  tokensOut?: number;
  toolUseId?: string;
  isError?: boolean;
  /** On a message taken from the queue: the seq of its `message_queued` event. */
  queuedSeq?: number;
};

export type MessageInput = {
  role: string;
  content: string;
  toolUseId: string;
  isError: boolean;
};

export type Page<T> = { items: T[]; next?: string };

/**
 * What a send does while a run holds the session: `enqueue` (the default)
 * queues it for after that run, `reject` answers 409 as before queues
 * existed, `interrupt` stops that run and is taken next.
 */
export type SendMode = "enqueue" | "reject" | "interrupt";

/** A queued send no run has taken yet: its `message_queued` event's seq and its messages. */
export type QueuedSend = { seq: number; interrupt: boolean; messages: MessageInput[] };

export function isTerminal(event: { type: string }): boolean {
  return TERMINAL_TYPES.has(event.type);
}
