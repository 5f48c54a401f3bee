import { Code, PlatformError } from "@platform/errors";
import { CronSchedule } from "./cron.ts";
import type { AuthContext, Page } from "./model.ts";
import type {
  CatchUp,
  Schedule,
  ScheduleChanges,
  ScheduleFiring,
  ScheduleStore,
  ScheduleTarget,
} from "./schedule-store.ts";
import type { Store } from "./store.ts";
import { listLimit, MAX_MESSAGE_BYTES, requireUuid } from "./validate.ts";

export const MAX_SCHEDULES_PER_AGENT = 100;
export const NEXT_RUNS_DEFAULT = 5;
export const NEXT_RUNS_MAX = 50;

export type ScheduleInput = {
  agentId: string;
  cron: string;
  timeZone: string;
  message: string;
  target: string;
  sessionId: string;
  catchUp: string;
  enabled?: boolean;
};

export type ScheduleUpdate = {
  cron?: string;
  timeZone?: string;
  message?: string;
  catchUp?: string;
  enabled?: boolean;
};

/** A schedule as the API shows it: with its next slots (none while paused). */
export type ScheduleView = Schedule & { nextRuns: Date[] };

/**
 * Managing an agent's schedules. The ticker (scheduler.ts) fires them; here
 * are the rules of their fields, checked before anything is stored.
 */
export class Schedules {
  constructor(
    private readonly schedules: ScheduleStore,
    private readonly store: Store,
    /** The ticker's clock, so next runs and the ticker agree (tests move it). */
    private readonly clock: () => Date,
  ) {}

  async create(auth: AuthContext, input: ScheduleInput, nextRuns?: number): Promise<ScheduleView> {
    const agentId = requireUuid("agentId", input.agentId);
    const count = nextRunsOf(nextRuns);
    const timeZone = input.timeZone === "" ? "UTC" : input.timeZone;
    const now = this.clock();
    const cron = CronSchedule.parse(input.cron, timeZone, now);
    const message = checkMessage(input.message);
    const target = targetOf(input.target);
    const catchUp = catchUpOf(input.catchUp);
    let sessionId: string | undefined;
    if (target === "session") {
      sessionId = requireUuid("sessionId", input.sessionId);
    } else if (input.sessionId !== "")
      throw PlatformError.invalidArgument('sessionId is only allowed when target is "session"');
    const agent = await this.store.getAgent(auth.orgId, agentId);
    if (!agent) throw PlatformError.notFound("agent not found");
    if (sessionId) {
      const session = await this.store.getSession(auth.orgId, sessionId);
      if (!session || session.agentId !== agentId) throw PlatformError.notFound("session not found for this agent");
    }
    const enabled = input.enabled ?? true;
    const created = await this.schedules.create(
      {
        orgId: auth.orgId,
        agentId,
        createdBy: auth.userId,
        cron: input.cron.trim(),
        timeZone,
        message,
        target,
        sessionId,
        catchUp,
        enabled,
        nextRunAt: enabled ? (cron.nextAfter(now) ?? undefined) : undefined,
      },
      MAX_SCHEDULES_PER_AGENT,
    );
    if (!created)
      throw new PlatformError(
        Code.ResourceExhausted,
        "resource_exhausted",
        `the agent already has ${MAX_SCHEDULES_PER_AGENT} schedules (the most an agent may have); delete one first`,
      );
    return this.#view(created, count, cron);
  }

  async list(
    auth: AuthContext,
    agentId: string,
    limit: number | undefined,
    after: string,
    nextRuns?: number,
  ): Promise<Page<ScheduleView>> {
    const id = requireUuid("agentId", agentId);
    const pageSize = listLimit(limit);
    const count = nextRunsOf(nextRuns);
    if (!(await this.store.getAgent(auth.orgId, id))) throw PlatformError.notFound("agent not found");
    const page = await this.schedules.list(auth.orgId, id, pageSize, after === "" ? undefined : after);
    return { items: page.items.map((s) => this.#view(s, count)), next: page.next };
  }

  async get(auth: AuthContext, id: string, nextRuns?: number): Promise<ScheduleView> {
    const count = nextRunsOf(nextRuns);
    return this.#view(await this.#schedule(auth, id), count);
  }

  /**
   * Sets the fields given. A new cron or zone, or a resume, moves the next
   * slot to the first one after now (a resume never fires the slots it was
   * paused over); a pause clears it.
   */
  async update(auth: AuthContext, id: string, update: ScheduleUpdate, nextRuns?: number): Promise<ScheduleView> {
    const scheduleId = requireUuid("id", id);
    const count = nextRunsOf(nextRuns);
    const current = await this.#schedule(auth, scheduleId);
    const changes: ScheduleChanges = {};
    const now = this.clock();
    const timeZone = update.timeZone === undefined ? current.timeZone : update.timeZone || "UTC";
    const cronText = update.cron === undefined ? current.cron : update.cron.trim();
    const cron = CronSchedule.parse(cronText, timeZone, now);
    if (update.cron !== undefined) changes.cron = cronText;
    if (update.timeZone !== undefined) changes.timeZone = timeZone;
    if (update.message !== undefined) changes.message = checkMessage(update.message);
    if (update.catchUp !== undefined) changes.catchUp = catchUpOf(update.catchUp);
    const enabled = update.enabled ?? current.enabled;
    if (update.enabled !== undefined) changes.enabled = enabled;
    if (update.cron !== undefined || update.timeZone !== undefined || enabled !== current.enabled)
      changes.nextRunAt = enabled ? cron.nextAfter(now) : null;
    const updated =
      Object.keys(changes).length === 0 ? current : await this.schedules.update(auth.orgId, scheduleId, changes);
    if (!updated) throw PlatformError.notFound("schedule not found");
    return this.#view(updated, count, cron);
  }

  async delete(auth: AuthContext, id: string): Promise<void> {
    if (!(await this.schedules.delete(auth.orgId, requireUuid("id", id))))
      throw PlatformError.notFound("schedule not found");
  }

  async listFirings(
    auth: AuthContext,
    id: string,
    limit: number | undefined,
    after: string,
  ): Promise<Page<ScheduleFiring>> {
    const scheduleId = requireUuid("id", id);
    const pageSize = listLimit(limit);
    await this.#schedule(auth, scheduleId);
    return this.schedules.listFirings(auth.orgId, scheduleId, pageSize, after === "" ? undefined : after);
  }

  async #schedule(auth: AuthContext, id: string): Promise<Schedule> {
    const schedule = await this.schedules.get(auth.orgId, requireUuid("id", id));
    if (!schedule) throw PlatformError.notFound("schedule not found");
    return schedule;
  }

  #view(schedule: Schedule, count: number, cron?: CronSchedule): ScheduleView {
    if (!schedule.enabled || !schedule.nextRunAt || count === 0) return { ...schedule, nextRuns: [] };
    // Stored rows were checked when written; a parse here cannot fail for them.
    const parsed = cron ?? CronSchedule.parse(schedule.cron, schedule.timeZone, this.clock());
    const now = this.clock();
    // An overdue slot (the ticker has not reached it yet) is still the next one.
    const first = schedule.nextRunAt.getTime() <= now.getTime() ? schedule.nextRunAt : undefined;
    const rest = parsed.next(first ? count - 1 : count, first ?? now);
    return { ...schedule, nextRuns: first ? [first, ...rest] : rest };
  }
}

function nextRunsOf(n: number | undefined): number {
  if (n === undefined) return NEXT_RUNS_DEFAULT;
  if (!Number.isInteger(n) || n < 0 || n > NEXT_RUNS_MAX)
    throw PlatformError.invalidArgument(`nextRuns must be between 0 and ${NEXT_RUNS_MAX}`);
  return n;
}

function checkMessage(message: string): string {
  if (message.trim() === "") throw PlatformError.invalidArgument("message is required");
  if (Buffer.byteLength(message) > MAX_MESSAGE_BYTES)
    throw PlatformError.invalidArgument(`message is larger than ${MAX_MESSAGE_BYTES} bytes`);
  return message;
}

function targetOf(target: string): ScheduleTarget {
  if (target === "" || target === "new_session") return "new_session";
  if (target === "session") return "session";
  throw PlatformError.invalidArgument(`target must be "new_session" or "session", not "${target.slice(0, 64)}"`);
}

function catchUpOf(catchUp: string): CatchUp {
  if (catchUp === "" || catchUp === "skip") return "skip";
  if (catchUp === "one") return "one";
  throw PlatformError.invalidArgument(`catchUp must be "skip" or "one", not "${catchUp.slice(0, 64)}"`);
}
