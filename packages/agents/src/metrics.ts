import type { Database } from "@platform/db";
import { Gauge, type Registry } from "@platform/rpc";
import type { AgentsDB } from "./db/schema.ts";

const STATES = ["running", "cancelling", "lapsed"] as const;

/**
 * agents' own metrics, read at each scrape. Runs live in the sessions that
 * hold them (active_run_id, its lease, a pending cancel), so the runs by
 * state are the database's, for every replica at once: `running` (lease
 * current), `cancelling` (a cancel asked, the run not yet ended), `lapsed`
 * (the lease ran out: its process died, the reaper ends it). The query reads
 * the partial index over held sessions only. `platform_agents_runs_local`
 * is how many of them run in this process. Open SSE streams are rpc's
 * `platform_sse_streams_open` by route.
 */
export function registerAgentsMetrics(
  registry: Registry,
  database: Database<AgentsDB>,
  isLocal: (runId: string) => boolean,
): void {
  type Held = { active_run_id: string | null; run_lease_until: Date | null; cancel_requested: boolean };
  // One query per scrape: prom-client collects every metric at once, so both gauges share it.
  let pending: Promise<Held[] | undefined> | undefined;
  const held = () =>
    (pending ??= database.db
      .selectFrom("sessions")
      .select(["active_run_id", "run_lease_until", "cancel_requested"])
      .where("active_run_id", "is not", null)
      .execute()
      .catch(() => undefined)
      .finally(() => {
        pending = undefined;
      }));
  new Gauge({
    name: "platform_agents_runs",
    help: "Runs holding a session, by state (every replica's: read from the database)",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      const rows = await held();
      this.reset();
      if (!rows) return;
      const counts = Object.fromEntries(STATES.map((s) => [s, 0])) as Record<(typeof STATES)[number], number>;
      const now = Date.now();
      for (const row of rows) {
        if (row.run_lease_until && new Date(row.run_lease_until).getTime() < now) counts.lapsed++;
        else if (row.cancel_requested) counts.cancelling++;
        else counts.running++;
      }
      for (const state of STATES) this.set({ state }, counts[state]);
    },
  });
  new Gauge({
    name: "platform_agents_runs_local",
    help: "Runs of this process holding a session",
    registers: [registry],
    async collect() {
      const rows = await held();
      this.reset();
      if (rows) this.set(rows.filter((r) => r.active_run_id && isLocal(r.active_run_id)).length);
    },
  });
}
