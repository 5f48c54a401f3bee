import { type Kysely, sql } from "kysely";
import {
  type Budgets,
  EMPTY_USAGE,
  type SessionBudgets,
  type UsageFilter,
  type UsageRow,
  type UsageStore,
  type UsageTotals,
} from "../domain/usage.ts";
import type { AgentsDB } from "./schema.ts";

/** Usage rows and session budgets in PostgreSQL / PGlite (table usage_records, migration 0008). */
export class KyselyUsageStore implements UsageStore {
  constructor(private readonly db: Kysely<AgentsDB>) {}

  async record(rows: readonly UsageRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .insertInto("usage_records")
      .values(
        rows.map((r) => ({
          org_id: r.orgId,
          agent_id: r.agentId,
          session_id: r.sessionId,
          run_id: r.runId,
          kind: r.kind,
          model: r.model ?? "",
          tool: r.tool ?? "",
          input_tokens: r.inputTokens ?? 0,
          output_tokens: r.outputTokens ?? 0,
          cpu_ms: Math.round(r.cpuMs ?? 0),
          wall_ms: Math.round(r.wallMs ?? 0),
          at: r.at,
        })),
      )
      .execute();
  }

  async totals(orgId: string, filter: UsageFilter): Promise<UsageTotals> {
    const rows = await this.#filtered(orgId, filter)
      .select([
        "kind",
        "model",
        sql<string>`sum(input_tokens)`.as("input_tokens"),
        sql<string>`sum(output_tokens)`.as("output_tokens"),
        sql<string>`sum(cpu_ms)`.as("cpu_ms"),
        sql<string>`sum(wall_ms)`.as("wall_ms"),
        sql<string>`count(*)`.as("calls"),
      ])
      .groupBy(["kind", "model"])
      .orderBy("model")
      .execute();
    const sessions = await this.#filtered(orgId, filter)
      .select(sql<string>`count(distinct session_id)`.as("n"))
      .executeTakeFirst();
    const out: UsageTotals = { ...EMPTY_USAGE, models: [], sessions: Number(sessions?.n ?? 0) };
    for (const r of rows) {
      const calls = Number(r.calls);
      if (r.kind === "model") {
        const inputTokens = Number(r.input_tokens);
        const outputTokens = Number(r.output_tokens);
        out.inputTokens += inputTokens;
        out.outputTokens += outputTokens;
        out.modelCalls += calls;
        out.models.push({ model: r.model, inputTokens, outputTokens, calls });
      } else {
        out.toolCalls += calls;
        out.cpuMs += Number(r.cpu_ms);
        out.wallMs += Number(r.wall_ms);
      }
    }
    return out;
  }

  /** The org's rows the filter selects; `until` is exclusive. */
  #filtered(orgId: string, filter: UsageFilter) {
    let query = this.db.selectFrom("usage_records").where("org_id", "=", orgId);
    if (filter.sessionId) query = query.where("session_id", "=", filter.sessionId);
    if (filter.agentId) query = query.where("agent_id", "=", filter.agentId);
    if (filter.since) query = query.where("at", ">=", filter.since);
    if (filter.until) query = query.where("at", "<", filter.until);
    return query;
  }

  async sessionBudgets(orgId: string, sessionId: string): Promise<SessionBudgets | undefined> {
    // The agent's row even when deleted: its sessions stay readable.
    const row = await this.db
      .selectFrom("sessions as s")
      .innerJoin("agents as a", "a.id", "s.agent_id")
      .select(["s.id", "s.agent_id", "s.budgets as own", "a.budgets as agent"])
      .where("s.org_id", "=", orgId)
      .where("s.id", "=", sessionId)
      .executeTakeFirst();
    return row && { sessionId: row.id, agentId: row.agent_id, own: budgetsOf(row.own), agent: budgetsOf(row.agent) };
  }

  async setSessionBudgets(orgId: string, sessionId: string, budgets: Budgets): Promise<boolean> {
    const row = await this.db
      .updateTable("sessions")
      .set({ budgets: JSON.stringify(budgets) })
      .where("org_id", "=", orgId)
      .where("id", "=", sessionId)
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }
}

/** Stored budgets, keeping only positive whole numbers of the known fields. */
export function budgetsOf(value: unknown): Budgets {
  const raw = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  const out: Budgets = {};
  if (!raw || typeof raw !== "object") return out;
  const r = raw as Record<string, unknown>;
  for (const field of ["maxTokens", "maxToolCalls", "maxCpuSeconds"] as const) {
    const v = r[field];
    if (typeof v === "number" && Number.isSafeInteger(v) && v > 0) out[field] = v;
  }
  return out;
}
