import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { CronSchedule } from "./cron.ts";
import type { AuthContext } from "./model.ts";
import type { Runs } from "./ports.ts";
import type { ClaimedFiring, ClaimPlan, Schedule, ScheduleStore } from "./schedule-store.ts";
import type { Store } from "./store.ts";

/** How long a firing may stay `claimed` before it counts as lost with its replica. */
export const STALE_CLAIM_MS = 10 * 60_000;

export type SchedulerOptions = {
  /** How often the ticker looks for due slots; 0: only when tick() is called (tests). */
  intervalMs: number;
  /**
   * How late a slot may be and still fire as on time: a slot older than this
   * when first seen was missed (no replica ran), and follows `catch_up`.
   */
  graceMs: number;
  /** Schedules claimed per transaction. */
  batch: number;
};

/**
 * The ticker: finds due schedules, takes each slot once (the store's claim:
 * row locks plus a firing row unique per slot), then fires it as the
 * schedule's org: the agent's session gets the message and a run starts.
 *
 * Authorization: a schedule was authorized when it was created (the caller's
 * credential, for its org and agent); a firing carries no credential and
 * calls the domain directly with an AuthContext of the stored org and the
 * creator's user id (method `schedule:<id>`, for logs). It reaches only the
 * schedule's own agent and session in that org.
 */
export class Scheduler {
  #timer?: NodeJS.Timeout;
  #running?: Promise<ClaimedFiring[]>;
  #stopped = false;

  constructor(
    private readonly schedules: ScheduleStore,
    private readonly store: Store,
    private readonly runs: Runs,
    private readonly clock: () => Date,
    private readonly options: SchedulerOptions,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.options.intervalMs <= 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      if (this.#running) return;
      this.tick().catch((err) => this.logger.warn({ err }, "schedule tick failed"));
    }, this.options.intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running?.catch(() => {});
  }

  /** One pass at the clock's now: claims the due slots, fires them; returns what this replica took. */
  async tick(): Promise<ClaimedFiring[]> {
    while (this.#running) await this.#running.catch(() => {});
    const pass = this.#pass();
    this.#running = pass;
    try {
      return await pass;
    } finally {
      this.#running = undefined;
    }
  }

  async #pass(): Promise<ClaimedFiring[]> {
    const taken: ClaimedFiring[] = [];
    // A claim's send takes seconds; one still open after this long lost its replica.
    const stale = await this.schedules.failStaleClaims(
      new Date(this.clock().getTime() - STALE_CLAIM_MS),
      "interrupted: the replica that claimed the slot stopped before sending the message",
    );
    if (stale > 0) this.logger.warn({ firings: stale }, "marked firings whose replica stopped as failed");
    for (;;) {
      if (this.#stopped) return taken;
      const now = this.clock();
      const claimed = await this.schedules.claimDue(now, this.options.batch, (s) => this.plan(s, now));
      for (const c of claimed) {
        if (c.firing.status === "claimed") await this.#fire(c);
        taken.push(c);
      }
      if (claimed.length < this.options.batch) return taken;
    }
  }

  /**
   * What a due schedule does at `now`: the latest slot L ≤ now fires when it
   * is within the grace; an older L was missed (no replica ran at its time)
   * and fires only with catch_up `one`, else it is recorded as skipped
   * (`missed`). Slots before L are never fired. The next slot is the first
   * after L.
   */
  plan(schedule: Schedule, now: Date): ClaimPlan {
    let cron: CronSchedule;
    try {
      cron = CronSchedule.parse(schedule.cron, schedule.timeZone, now);
    } catch {
      // A zone the runtime no longer knows: stop instead of retrying every tick.
      return { next: null };
    }
    const latest = cron.latestAtOrBefore(now) ?? schedule.nextRunAt ?? now;
    const next = cron.nextAfter(latest);
    const late = now.getTime() - latest.getTime() > this.options.graceMs;
    if (!late || schedule.catchUp === "one") return { slot: { time: latest, status: "claimed" }, next };
    return { slot: { time: latest, status: "skipped", reason: "missed" }, next };
  }

  async #fire({ firing, schedule }: ClaimedFiring): Promise<void> {
    const auth: AuthContext = { orgId: schedule.orgId, userId: schedule.createdBy, method: `schedule:${schedule.id}` };
    const log = this.logger.child({ scheduleId: schedule.id, firingId: firing.id, slot: firing.slotTime });
    let sessionId: string | undefined;
    try {
      const agent = await this.store.getAgent(auth.orgId, schedule.agentId);
      if (!agent) return await this.#gone(schedule, firing.id, "agent_not_found");
      if (schedule.target === "session") {
        const session = schedule.sessionId ? await this.store.getSession(auth.orgId, schedule.sessionId) : undefined;
        if (!session) return await this.#gone(schedule, firing.id, "session_not_found");
        sessionId = session.id;
      } else {
        sessionId = (await this.store.createSession(auth.orgId, agent.id)).id;
      }
      // The queued-message rule: a run still going on the session takes
      // this message after it (mode enqueue), as a client's send would.
      const sent = await this.runs.send(
        auth,
        agent,
        sessionId,
        [{ role: "user", content: schedule.message, toolUseId: "", isError: false }],
        "enqueue",
        log,
      );
      if ("started" in sent) {
        await this.#finish(firing.id, { status: "started", sessionId, runId: sent.started.runId });
        log.info({ sessionId, runId: sent.started.runId }, "schedule fired");
      } else {
        await this.#finish(firing.id, { status: "queued", sessionId, reason: `message_queued seq ${sent.queued.seq}` });
        log.info(
          { sessionId, queuedSeq: sent.queued.seq },
          "schedule fired; its message waits behind the session's run",
        );
      }
    } catch (err) {
      const outcome = outcomeOf(err);
      log.warn({ err, sessionId, ...outcome }, "schedule firing did not start a run");
      await this.#finish(firing.id, { ...outcome, sessionId }).catch((e) =>
        log.warn({ err: e }, "could not record the firing's outcome"),
      );
    }
  }

  /**
   * The schedule's agent or session was deleted: the firing fails and the
   * schedule is paused, so it does not fail again at every slot (resuming
   * it fails the same way until it is deleted).
   */
  async #gone(schedule: Schedule, firingId: string, reason: string): Promise<void> {
    await this.#finish(firingId, { status: "failed", reason });
    await this.schedules.update(schedule.orgId, schedule.id, { enabled: false, nextRunAt: null });
    this.logger.warn({ scheduleId: schedule.id, reason }, "schedule paused: its target is gone");
  }

  #finish(
    id: string,
    outcome: {
      status: "started" | "queued" | "skipped" | "failed";
      reason?: string;
      sessionId?: string;
      runId?: string;
    },
  ): Promise<void> {
    return this.schedules.finishFiring(id, outcome);
  }
}

/**
 * The session waits for tool answers (`tool_calls_pending`) or stayed busy
 * through the send's retries (`run_active`): the firing is skipped.
 */
function outcomeOf(err: unknown): { status: "skipped" | "failed"; reason: string } {
  if (err instanceof PlatformError) {
    if (err.code === Code.Aborted && err.reason === "tool_calls_pending")
      return { status: "skipped", reason: "tool_calls_pending" };
    if (err.code === Code.Aborted) return { status: "skipped", reason: "run_active" };
    if (err.code === Code.NotFound) return { status: "failed", reason: "session_not_found" };
    return { status: "failed", reason: err.message.slice(0, 500) };
  }
  return { status: "failed", reason: "internal error" };
}
