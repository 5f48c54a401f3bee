import type { Page } from "./model.ts";

export type ScheduleTarget = "new_session" | "session";
export type CatchUp = "skip" | "one";
export type FiringStatus = "claimed" | "started" | "queued" | "skipped" | "failed";

export type Schedule = {
  id: string;
  orgId: string;
  agentId: string;
  /** The user who created it; firings run in the org's name, logged as this user. */
  createdBy: string;
  cron: string;
  timeZone: string;
  message: string;
  target: ScheduleTarget;
  /** With target `session`. */
  sessionId?: string;
  catchUp: CatchUp;
  enabled: boolean;
  /** The slot it fires next; undefined while paused. */
  nextRunAt?: Date;
  createdAt: Date;
  updatedAt: Date;
};

export type ScheduleFiring = {
  id: string;
  scheduleId: string;
  slotTime: Date;
  firedAt: Date;
  status: FiringStatus;
  reason: string;
  sessionId?: string;
  runId?: string;
};

export type NewSchedule = Omit<Schedule, "id" | "createdAt" | "updatedAt">;

export type ScheduleChanges = Partial<Pick<Schedule, "cron" | "timeZone" | "message" | "catchUp" | "enabled">> & {
  /** Set together with a change of cron, zone or enabled: null pauses. */
  nextRunAt?: Date | null;
};

/**
 * What to do with a due schedule, decided by the ticker inside the claim:
 * `fire` the slot (a firing row is inserted, unique per slot, so only one
 * replica ever fires it), or record it as `skipped` with a reason, or
 * nothing; then move `next_run_at` to `next` (null: the pattern has ended).
 */
export type ClaimPlan = {
  slot?: { time: Date; status: "claimed" | "skipped"; reason?: string };
  next: Date | null;
};

/** A slot this replica took: it alone fires it. */
export type ClaimedFiring = { firing: ScheduleFiring; schedule: Schedule };

/** Persistence of schedules; every read and write is scoped to an org, as in Store. */
export interface ScheduleStore {
  /** Undefined when the agent already has `maxPerAgent` schedules. */
  create(schedule: NewSchedule, maxPerAgent: number): Promise<Schedule | undefined>;
  get(orgId: string, id: string): Promise<Schedule | undefined>;
  /** Newest first. */
  list(orgId: string, agentId: string, limit: number, after?: string): Promise<Page<Schedule>>;
  update(orgId: string, id: string, changes: ScheduleChanges): Promise<Schedule | undefined>;
  delete(orgId: string, id: string): Promise<boolean>;
  /** Newest first. */
  listFirings(orgId: string, scheduleId: string, limit: number, after?: string): Promise<Page<ScheduleFiring>>;
  /**
   * In one transaction: locks up to `limit` enabled schedules whose
   * `next_run_at` ≤ `now` (skipping rows another replica holds), asks `plan`
   * for each, inserts its firing row (none when another replica already has
   * that slot) and moves `next_run_at`. Returns the firings this call took.
   */
  claimDue(now: Date, limit: number, plan: (schedule: Schedule) => ClaimPlan): Promise<ClaimedFiring[]>;
  /**
   * Firings still `claimed` that were taken before `before` (their replica
   * died between the claim and the send) become `failed` with `reason`;
   * returns how many.
   */
  failStaleClaims(before: Date, reason: string): Promise<number>;
  /** Records how a claimed firing went. */
  finishFiring(
    id: string,
    outcome: { status: FiringStatus; reason?: string; sessionId?: string; runId?: string },
  ): Promise<void>;
}
