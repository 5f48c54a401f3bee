import { randomUUID } from "node:crypto";
import { type Kysely, type Selectable, sql } from "kysely";
import { decodeCursor, encodeCursor } from "../domain/cursor.ts";
import type { Page } from "../domain/model.ts";
import type {
  CatchUp,
  ClaimedFiring,
  ClaimPlan,
  FiringStatus,
  NewSchedule,
  Schedule,
  ScheduleChanges,
  ScheduleFiring,
  ScheduleStore,
  ScheduleTarget,
} from "../domain/schedule-store.ts";
import type { AgentSchedulesTable, AgentsDB, ScheduleFiringsTable } from "./schema.ts";

/** Schedules and their firings in agent_schedules / schedule_firings (migration 0009). */
export class KyselyScheduleStore implements ScheduleStore {
  constructor(private readonly db: Kysely<AgentsDB>) {}

  async create(s: NewSchedule, maxPerAgent: number): Promise<Schedule | undefined> {
    // One statement: the count and the insert see the same snapshot (two
    // concurrent creates at the limit may both pass; the bound is a guard
    // against runaway clients, not an exact quota).
    const row = await this.db
      .insertInto("agent_schedules")
      .columns([
        "id",
        "org_id",
        "agent_id",
        "created_by",
        "cron",
        "time_zone",
        "message",
        "target",
        "session_id",
        "catch_up",
        "enabled",
        "next_run_at",
      ])
      .expression(
        this.db
          .selectNoFrom([
            sql<string>`${randomUUID()}::uuid`.as("id"),
            sql<string>`${s.orgId}::uuid`.as("org_id"),
            sql<string>`${s.agentId}::uuid`.as("agent_id"),
            sql<string>`${s.createdBy}`.as("created_by"),
            sql<string>`${s.cron}`.as("cron"),
            sql<string>`${s.timeZone}`.as("time_zone"),
            sql<string>`${s.message}`.as("message"),
            sql<string>`${s.target}`.as("target"),
            sql<string | null>`${s.sessionId ?? null}::uuid`.as("session_id"),
            sql<string>`${s.catchUp}`.as("catch_up"),
            sql<boolean>`${s.enabled}::boolean`.as("enabled"),
            sql<Date | null>`${s.nextRunAt?.toISOString() ?? null}::timestamptz`.as("next_run_at"),
          ])
          .where(
            sql<boolean>`(select count(*) from agent_schedules where org_id = ${s.orgId}::uuid and agent_id = ${s.agentId}::uuid) < ${maxPerAgent}`,
          ),
      )
      .returningAll()
      .executeTakeFirst();
    return row ? toSchedule(row) : undefined;
  }

  async get(orgId: string, id: string): Promise<Schedule | undefined> {
    const row = await this.db
      .selectFrom("agent_schedules")
      .selectAll()
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .executeTakeFirst();
    return row ? toSchedule(row) : undefined;
  }

  async list(orgId: string, agentId: string, limit: number, after?: string): Promise<Page<Schedule>> {
    let query = this.db
      .selectFrom("agent_schedules")
      .selectAll()
      .where("org_id", "=", orgId)
      .where("agent_id", "=", agentId);
    if (after !== undefined) query = query.where("pos", "<", decodeCursor(after));
    const rows = await query
      .orderBy("pos", "desc")
      .limit(limit + 1)
      .execute();
    return pageOf(rows, limit, toSchedule);
  }

  async update(orgId: string, id: string, changes: ScheduleChanges): Promise<Schedule | undefined> {
    const set: Partial<Record<keyof AgentSchedulesTable, unknown>> = {};
    if (changes.cron !== undefined) set.cron = changes.cron;
    if (changes.timeZone !== undefined) set.time_zone = changes.timeZone;
    if (changes.message !== undefined) set.message = changes.message;
    if (changes.catchUp !== undefined) set.catch_up = changes.catchUp;
    if (changes.enabled !== undefined) set.enabled = changes.enabled;
    if (changes.nextRunAt !== undefined) set.next_run_at = changes.nextRunAt;
    const row = await this.db
      .updateTable("agent_schedules")
      .set({ ...(set as object), updated_at: sql`now()` })
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
    return row ? toSchedule(row) : undefined;
  }

  async delete(orgId: string, id: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom("agent_schedules")
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  async listFirings(orgId: string, scheduleId: string, limit: number, after?: string): Promise<Page<ScheduleFiring>> {
    let query = this.db
      .selectFrom("schedule_firings as f")
      .innerJoin("agent_schedules as s", "s.id", "f.schedule_id")
      .selectAll("f")
      .where("s.org_id", "=", orgId)
      .where("f.schedule_id", "=", scheduleId);
    if (after !== undefined) query = query.where("f.pos", "<", decodeCursor(after));
    const rows = await query
      .orderBy("f.pos", "desc")
      .limit(limit + 1)
      .execute();
    return pageOf(rows, limit, toFiring);
  }

  async claimDue(now: Date, limit: number, plan: (schedule: Schedule) => ClaimPlan): Promise<ClaimedFiring[]> {
    return this.db.transaction().execute(async (trx) => {
      // Another replica's claim holds its rows until it commits: skip them
      // instead of waiting; by then their next_run_at has moved past now.
      const rows = await trx
        .selectFrom("agent_schedules")
        .selectAll()
        .where("enabled", "=", true)
        .where("next_run_at", "<=", now)
        .orderBy("next_run_at")
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .execute();
      const taken: ClaimedFiring[] = [];
      for (const row of rows) {
        const schedule = toSchedule(row);
        const p = plan(schedule);
        await trx.updateTable("agent_schedules").set({ next_run_at: p.next }).where("id", "=", row.id).execute();
        if (!p.slot) continue;
        // The slot's row is the proof of who fires it: a second insert for
        // the same slot (any replica, any process) inserts nothing.
        const firing = await trx
          .insertInto("schedule_firings")
          .values({
            id: randomUUID(),
            schedule_id: row.id,
            slot_time: p.slot.time,
            fired_at: now,
            status: p.slot.status,
            reason: p.slot.reason ?? "",
            session_id: null,
            run_id: null,
          })
          .onConflict((oc) => oc.columns(["schedule_id", "slot_time"]).doNothing())
          .returningAll()
          .executeTakeFirst();
        if (firing) taken.push({ firing: toFiring(firing), schedule });
      }
      return taken;
    });
  }

  async failStaleClaims(before: Date, reason: string): Promise<number> {
    const res = await this.db
      .updateTable("schedule_firings")
      .set({ status: "failed", reason })
      .where("status", "=", "claimed")
      .where("fired_at", "<", before)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }

  async finishFiring(
    id: string,
    outcome: { status: FiringStatus; reason?: string; sessionId?: string; runId?: string },
  ): Promise<void> {
    await this.db
      .updateTable("schedule_firings")
      .set({
        status: outcome.status,
        reason: outcome.reason ?? "",
        session_id: outcome.sessionId ?? null,
        run_id: outcome.runId ?? null,
      })
      .where("id", "=", id)
      .execute();
  }
}

function toSchedule(row: Selectable<AgentSchedulesTable>): Schedule {
  return {
    id: row.id,
    orgId: row.org_id,
    agentId: row.agent_id,
    createdBy: row.created_by,
    cron: row.cron,
    timeZone: row.time_zone,
    message: row.message,
    target: row.target as ScheduleTarget,
    sessionId: row.session_id ?? undefined,
    catchUp: row.catch_up as CatchUp,
    enabled: row.enabled,
    nextRunAt: row.next_run_at ? new Date(row.next_run_at) : undefined,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function toFiring(row: Selectable<ScheduleFiringsTable>): ScheduleFiring {
  return {
    id: row.id,
    scheduleId: row.schedule_id,
    slotTime: new Date(row.slot_time),
    firedAt: new Date(row.fired_at),
    status: row.status as FiringStatus,
    reason: row.reason,
    sessionId: row.session_id ?? undefined,
    runId: row.run_id ?? undefined,
  };
}

function pageOf<R extends { pos: number | string | bigint }, T>(rows: R[], limit: number, map: (row: R) => T): Page<T> {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items: items.map(map), next: rows.length > limit && last ? encodeCursor(Number(last.pos)) : undefined };
}
