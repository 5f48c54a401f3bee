import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type Agent as AgentMsg,
  AgentSchema,
  type PendingToolCall as PendingToolCallMsg,
  PendingToolCallSchema,
  type SessionEvent as SessionEventMsg,
  SessionEventSchema,
  type SessionFile as SessionFileMsg,
  SessionFileSchema,
  type Session as SessionMsg,
  SessionSchema,
} from "@platform/gen/agents/v1/agents_pb";
import {
  type Budgets as BudgetsMsg,
  BudgetsSchema,
  type Usage as UsageMsg,
  UsageSchema,
} from "@platform/gen/agents/v1/usage_pb";
import type { Agent, PendingCall, Session, SessionEvent } from "../domain/model.ts";
import type { WorkspaceEntry } from "../domain/ports.ts";
import type { Budgets, UsageTotals } from "../domain/usage.ts";

export function agentToProto(a: Agent): AgentMsg {
  return create(AgentSchema, {
    id: a.id,
    name: a.name,
    slug: a.slug,
    model: a.model,
    systemPrompt: a.systemPrompt,
    toolPermissions: { ...a.toolPermissions },
    // Names and URLs only: header values are write-only secrets.
    mcpServers: a.mcpServers.map((s) => ({ name: s.name, url: s.url, headerNames: [...s.headerNames] })),
    clientTools: a.clientTools.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: JSON.stringify(t.inputSchema),
    })),
    budgets: budgetsToProto(a.budgets),
    networkPolicy: a.networkPolicy,
    image: a.image ?? "",
    createdAt: timestampFromDate(a.createdAt),
    updatedAt: timestampFromDate(a.updatedAt),
  });
}

/** Budgets with only the limits set (absent: no limit). */
export function budgetsToProto(b: Budgets): BudgetsMsg {
  return create(BudgetsSchema, {
    ...(b.maxTokens !== undefined ? { maxTokens: BigInt(b.maxTokens) } : {}),
    ...(b.maxToolCalls !== undefined ? { maxToolCalls: BigInt(b.maxToolCalls) } : {}),
    ...(b.maxCpuSeconds !== undefined ? { maxCpuSeconds: BigInt(b.maxCpuSeconds) } : {}),
  });
}

export function usageToProto(u: UsageTotals): UsageMsg {
  return create(UsageSchema, {
    inputTokens: BigInt(u.inputTokens),
    outputTokens: BigInt(u.outputTokens),
    modelCalls: BigInt(u.modelCalls),
    toolCalls: BigInt(u.toolCalls),
    sandboxCpuMs: BigInt(u.cpuMs),
    sandboxWallMs: BigInt(u.wallMs),
    models: u.models.map((m) => ({
      model: m.model,
      inputTokens: BigInt(m.inputTokens),
      outputTokens: BigInt(m.outputTokens),
      calls: BigInt(m.calls),
    })),
  });
}

export function sessionToProto(s: Session): SessionMsg {
  return create(SessionSchema, {
    id: s.id,
    agentId: s.agentId,
    status: s.status,
    lastSeq: BigInt(s.lastSeq),
    sandboxId: s.sandboxId ?? "",
    budgets: s.budgets ? budgetsToProto(s.budgets) : undefined,
    createdAt: timestampFromDate(s.createdAt),
    updatedAt: timestampFromDate(s.updatedAt),
  });
}

/**
 * The message as `create(SessionEventSchema, ...)` would make it (every field
 * set, in the schema's order), written out: it runs for every event relayed
 * (a replay of a long log is thousands a second), where create's walk over
 * an init object and timestampFromDate's second create showed in profiles.
 * Zero counts (most events') are the `0n` constant, not a BigInt made each time.
 */
export function eventToProto(e: SessionEvent): SessionEventMsg {
  const ms = e.createdAt.getTime();
  const seconds = Math.floor(ms / 1000);
  return {
    $typeName: SESSION_EVENT,
    seq: BigInt(e.seq),
    type: e.type,
    content: e.content,
    tokensIn: e.tokensIn === 0 ? 0n : BigInt(e.tokensIn),
    tokensOut: e.tokensOut === 0 ? 0n : BigInt(e.tokensOut),
    toolUseId: e.toolUseId,
    isError: e.isError,
    createdAt: { $typeName: TIMESTAMP, seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1_000_000 },
    queuedSeq: e.queuedSeq === undefined || e.queuedSeq === 0 ? 0n : BigInt(e.queuedSeq),
  };
}

const SESSION_EVENT = SessionEventSchema.typeName as SessionEventMsg["$typeName"];
const TIMESTAMP = TimestampSchema.typeName as Timestamp["$typeName"];

export function sessionFileToProto(e: WorkspaceEntry): SessionFileMsg {
  return create(SessionFileSchema, {
    path: e.path,
    size: BigInt(e.size),
    isDir: e.isDir,
    mode: e.mode,
    modifiedAt: e.modifiedAt ? timestampFromDate(e.modifiedAt) : undefined,
  });
}

export function pendingCallToProto(c: PendingCall): PendingToolCallMsg {
  return create(PendingToolCallSchema, {
    toolUseId: c.toolUseId,
    name: c.name,
    input: JSON.stringify(c.input),
    kind: c.kind ?? "",
  });
}
