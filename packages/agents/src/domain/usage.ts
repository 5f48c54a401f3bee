// Usage records and budgets: what a session's runs consumed, summed over a
// range, and the limits a run stops at. Nothing here knows a transport.
import { Code, PlatformError } from "@platform/errors";
import type { AuthContext } from "./model.ts";
import { requireUuid } from "./validate.ts";

/**
 * Limits on one session's usage; absent: no limit. An agent's apply to
 * each of its sessions; a session's own replace them field by field.
 */
export type Budgets = { maxTokens?: number; maxToolCalls?: number; maxCpuSeconds?: number };

/** Budgets as a create or update gives them: 0 removes a limit (on update), absent leaves it. */
export type BudgetsInput = {
  maxTokens?: number | bigint;
  maxToolCalls?: number | bigint;
  maxCpuSeconds?: number | bigint;
};

/** Which budget a run reached, its limit and what was used (`cpu_seconds`: seconds, with decimals). */
export type BudgetHit = { budget: "tokens" | "tool_calls" | "cpu_seconds"; limit: number; used: number };

/**
 * One usage row: a model call (`model`, tokens) or a tool call (`tool`,
 * and for commands in the sandbox compute's CPU and wall time). Stored
 * with its time, so any range can be summed.
 */
export type UsageRow = {
  orgId: string;
  agentId: string;
  sessionId: string;
  runId: string;
  kind: "model" | "tool";
  model?: string;
  tool?: string;
  inputTokens?: number;
  outputTokens?: number;
  cpuMs?: number;
  wallMs?: number;
  at: Date;
};

export type ModelUsage = { model: string; inputTokens: number; outputTokens: number; calls: number };

export type UsageTotals = {
  inputTokens: number;
  outputTokens: number;
  modelCalls: number;
  toolCalls: number;
  cpuMs: number;
  wallMs: number;
  /** Per model, by name. */
  models: ModelUsage[];
  /** Sessions with rows in the sum. */
  sessions: number;
};

export const EMPTY_USAGE: UsageTotals = {
  inputTokens: 0,
  outputTokens: 0,
  modelCalls: 0,
  toolCalls: 0,
  cpuMs: 0,
  wallMs: 0,
  models: [],
  sessions: 0,
};

export type UsageFilter = { agentId?: string; sessionId?: string; since?: Date; until?: Date };

/** A session's budgets and its agent's (a deleted agent's too). */
export type SessionBudgets = { sessionId: string; agentId: string; own: Budgets; agent: Budgets };

/** Persistence of usage rows and session budgets; every read scoped to an org. Adapter: db/usage-store.ts. */
export interface UsageStore {
  record(rows: readonly UsageRow[]): Promise<void>;
  totals(orgId: string, filter: UsageFilter): Promise<UsageTotals>;
  /** Undefined when the session is missing or of another org. */
  sessionBudgets(orgId: string, sessionId: string): Promise<SessionBudgets | undefined>;
  /** Replaces the session's own budgets; false when missing or of another org. */
  setSessionBudgets(orgId: string, sessionId: string, budgets: Budgets): Promise<boolean>;
}

const FIELDS = ["maxTokens", "maxToolCalls", "maxCpuSeconds"] as const;

/** Checks budgets as given: whole numbers from 0 to 2^53-1 (0: no limit, or on update: remove). */
export function validateBudgets(input: BudgetsInput | undefined): Partial<Record<keyof Budgets, number>> {
  const out: Partial<Record<keyof Budgets, number>> = {};
  if (!input) return out;
  for (const field of FIELDS) {
    const raw = input[field];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 0)
      throw PlatformError.invalidArgument(
        `budgets.${field} must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`,
      );
    out[field] = n;
  }
  return out;
}

/** `current` with the given fields set (0 removes a limit). */
export function mergeBudgets(current: Budgets, changes: Partial<Record<keyof Budgets, number>>): Budgets {
  const out: Budgets = { ...current };
  for (const field of FIELDS) {
    const v = changes[field];
    if (v === undefined) continue;
    if (v === 0) delete out[field];
    else out[field] = v;
  }
  return out;
}

/** The limits in force for a session: its own, else its agent's, field by field. */
export function effectiveBudgets(agent: Budgets, own: Budgets): Budgets {
  return mergeBudgets(agent, own);
}

/** The first budget `used` has reached (used ≥ limit), if any. */
export function budgetReached(budgets: Budgets, used: UsageTotals): BudgetHit | undefined {
  const tokens = used.inputTokens + used.outputTokens;
  if (budgets.maxTokens !== undefined && tokens >= budgets.maxTokens)
    return { budget: "tokens", limit: budgets.maxTokens, used: tokens };
  if (budgets.maxToolCalls !== undefined && used.toolCalls >= budgets.maxToolCalls)
    return { budget: "tool_calls", limit: budgets.maxToolCalls, used: used.toolCalls };
  if (budgets.maxCpuSeconds !== undefined && used.cpuMs >= budgets.maxCpuSeconds * 1000)
    return { budget: "cpu_seconds", limit: budgets.maxCpuSeconds, used: used.cpuMs / 1000 };
  return undefined;
}

/** The refusal of a send to a session past a budget: 429 resource_exhausted, reason budget_exhausted. */
export function budgetExhausted(sessionId: string, hit: BudgetHit): PlatformError {
  return new PlatformError(
    Code.ResourceExhausted,
    "budget_exhausted",
    `session ${sessionId} reached its ${hit.budget} budget (used ${hit.used} of ${hit.limit}): raise the session's budget (PATCH /v1/sessions/${sessionId}/budgets) or its agent's to send again`,
    { budget: hit.budget, limit: String(hit.limit), used: String(hit.used) },
  );
}

/** One end of a usage range: RFC 3339, or empty (the default end). */
function parseTime(field: string, value: string): Date | undefined {
  if (value === "") return undefined;
  // RFC 3339: a date and a time with an offset (Z or ±hh:mm); Date.parse alone accepts far more.
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i.test(value))
    throw PlatformError.invalidArgument(`${field} must be an RFC 3339 time (e.g. 2026-01-31T00:00:00Z)`);
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw PlatformError.invalidArgument(`${field} is not a valid time`);
  return at;
}

/** The usage use cases: read a session's record, sum a range, set a session's budgets. */
export class UsageDomain {
  constructor(private readonly store: UsageStore) {}

  async sessionUsage(
    auth: AuthContext,
    id: string,
  ): Promise<SessionBudgets & { usage: UsageTotals; effective: Budgets }> {
    const budgets = await this.#budgets(auth, id);
    const usage = await this.store.totals(auth.orgId, { sessionId: budgets.sessionId });
    return { ...budgets, usage, effective: effectiveBudgets(budgets.agent, budgets.own) };
  }

  async usage(
    auth: AuthContext,
    query: { agentId: string; sessionId: string; since: string; until: string },
  ): Promise<{ usage: UsageTotals; since: Date; until: Date }> {
    const agentId = query.agentId === "" ? undefined : requireUuid("agentId", query.agentId);
    const sessionId = query.sessionId === "" ? undefined : requireUuid("sessionId", query.sessionId);
    const since = parseTime("since", query.since) ?? new Date(0);
    const until = parseTime("until", query.until) ?? new Date();
    if (until < since) throw PlatformError.invalidArgument("until must not be before since");
    // Rows of other orgs never count: the sum is of the caller's org's rows only.
    const usage = await this.store.totals(auth.orgId, { agentId, sessionId, since, until });
    return { usage, since, until };
  }

  async setSessionBudgets(
    auth: AuthContext,
    id: string,
    input: BudgetsInput | undefined,
  ): Promise<{ own: Budgets; effective: Budgets }> {
    const changes = validateBudgets(input);
    const current = await this.#budgets(auth, id);
    const own = mergeBudgets(current.own, changes);
    if (!(await this.store.setSessionBudgets(auth.orgId, current.sessionId, own)))
      throw PlatformError.notFound("session not found");
    return { own, effective: effectiveBudgets(current.agent, own) };
  }

  async #budgets(auth: AuthContext, id: string): Promise<SessionBudgets> {
    const found = await this.store.sessionBudgets(auth.orgId, requireUuid("id", id));
    if (!found) throw PlatformError.notFound("session not found");
    return found;
  }
}
