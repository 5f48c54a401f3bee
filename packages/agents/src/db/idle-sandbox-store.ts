import { type Kysely, sql } from "kysely";
import type { IdleSandbox, IdleSandboxStore } from "../domain/idle-sandboxes.ts";
import type { AgentsDB } from "./schema.ts";

/**
 * The idle-sandbox sweep's queries. A session's `updated_at` moves with
 * every message, stored event, run start and end, so "not updated for the
 * idle period and held by no run" is "idle that long".
 */
export class KyselyIdleSandboxStore implements IdleSandboxStore {
  constructor(private readonly db: Kysely<AgentsDB>) {}

  async idleSandboxes(idleMs: number, limit: number): Promise<IdleSandbox[]> {
    const rows = await this.db
      .selectFrom("sessions")
      .select(["id", "sandbox_id"])
      .where("sandbox_id", "is not", null)
      .where("active_run_id", "is", null)
      .where("updated_at", "<", sql<Date>`now() - make_interval(secs => ${idleMs / 1000})`)
      .orderBy("updated_at")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ sessionId: r.id, sandboxId: r.sandbox_id! }));
  }

  async forgetSandbox(sessionId: string, sandboxId: string, idleMs: number): Promise<boolean> {
    const row = await this.db
      .updateTable("sessions")
      .set({ sandbox_id: null, updated_at: sql`now()` })
      .where("id", "=", sessionId)
      .where("sandbox_id", "=", sandboxId)
      .where("active_run_id", "is", null)
      .where("updated_at", "<", sql<Date>`now() - make_interval(secs => ${idleMs / 1000})`)
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }
}
