import type { Interceptor } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { ComputeService, type ExecEvent } from "@platform/gen/compute/v1/compute_pb";
import { Counter, Gauge, Histogram, type Registry } from "@platform/rpc";
import { sql } from "kysely";

/** Exec wall times: a `true` takes milliseconds, a build minutes; the domain caps an exec at 600 s. */
const EXEC_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * How an exec ended, from its `completed` event: `success` (exit 0),
 * `error` (another exit code), `timeout` (124: the domain's timeout, or a
 * command's own `timeout`), `signal` (128 and above: killed, e.g. by the
 * memory limit), `cancelled` (the caller went away or cancelled).
 */
export function exitReasonOf(completed: { exitCode: number; cancelled: boolean }): string {
  if (completed.cancelled) return "cancelled";
  if (completed.exitCode === 0) return "success";
  if (completed.exitCode === 124) return "timeout";
  if (completed.exitCode >= 128) return "signal";
  return "error";
}

/**
 * compute's own metrics: sandboxes by status (read from the database at each
 * scrape; DESTROYED ones are history, not counted) and every exec's wall
 * time and exit reason, taken from the `completed` event ExecCommand streams.
 * Returns the interceptor that records the execs, for the server's list.
 */
export function registerComputeMetrics(registry: Registry, database: Database<unknown>): Interceptor {
  const registers = [registry];
  new Gauge({
    name: "platform_compute_sandboxes",
    help: "Sandboxes by status (STARTING, READY, PAUSED, FAILED; destroyed ones are not counted)",
    labelNames: ["status"],
    registers,
    async collect() {
      const rows = await sql<{ status: string; n: number }>`
        select status, count(*)::int as n from compute_sandboxes where status <> 'DESTROYED' group by status`
        .execute(database.db)
        .then((r) => r.rows)
        .catch(() => undefined);
      this.reset();
      if (!rows) return;
      for (const status of ["STARTING", "READY", "PAUSED", "FAILED"]) this.set({ status }, 0);
      for (const row of rows) this.set({ status: row.status }, Number(row.n));
    },
  });
  const execs = new Counter({
    name: "platform_compute_execs_total",
    help: "Execs that completed, by exit reason (success, error, timeout, signal, cancelled)",
    labelNames: ["reason"],
    registers,
  });
  const wall = new Histogram({
    name: "platform_compute_exec_duration_seconds",
    help: "An exec's wall time, process start to exit, by exit reason",
    labelNames: ["reason"],
    buckets: EXEC_BUCKETS,
    registers,
  });
  const observe = (event: ExecEvent) => {
    if (event.event.case !== "completed") return;
    const done = event.event.value;
    const reason = exitReasonOf(done);
    execs.inc({ reason });
    const t = done.wallTime;
    if (t) wall.observe({ reason }, Number(t.seconds) + t.nanos / 1e9);
  };
  return (next) => async (req) => {
    const res = await next(req);
    if (!res.stream || req.service.typeName !== ComputeService.typeName || req.method.name !== "ExecCommand")
      return res;
    const source = res.message as AsyncIterable<ExecEvent>;
    return {
      ...res,
      message: (async function* () {
        for await (const event of source) {
          observe(event);
          yield event;
        }
      })(),
    } as typeof res;
  };
}
