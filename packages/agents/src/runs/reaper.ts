import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { NewEvent, SessionEvent } from "../domain/model.ts";
import type { DeadRun, DeadRunsBy, Store } from "../domain/store.ts";
import type { EventHub } from "./hub.ts";

/** The `error` event that ends a run whose server stopped before it ended. */
export const RUN_INTERRUPTED =
  "the run was interrupted: the agents server running it stopped before it ended; send the message again to continue";

/** The result of a tool call that was running when its server stopped. */
export const TOOL_INTERRUPTED = JSON.stringify({
  error:
    "the tool call was interrupted: the agents server running it stopped; whether it ran, partly or fully, is unknown",
});

export type ReaperOptions = {
  /** How often this replica looks for runs whose lease lapsed. */
  intervalMs: number;
  /** Runs ended per sweep at most (the next sweep takes the rest). */
  batch?: number;
  /** Called once a dead run was ended (its session is free: its queued sends may start). */
  onEnded?: (run: DeadRun) => void;
};

/**
 * Ends runs whose process died: a run holds its session by a lease its
 * process renews; once the lease lapsed (or the run is known dead because
 * its replica restarted, see DeadRunsBy) the run can neither go on (the
 * model's stream and the tool's exec died with the process) nor be
 * silently dropped. The reaper writes, in the dead run's name and after
 * the last event it stored: a `tool_result` with `isError` for each of its
 * tool calls that has no result (whether the command ran is unknown, so it
 * is not run again), then the `error` event RUN_INTERRUPTED, freeing the
 * session in the same statement. Whoever sees a dead run first ends it: the
 * periodic sweep of every replica, the next send to the session, a follower
 * waiting for the run's end. The statement only matches while the run is
 * still dead and the log still ends where the reaper read it, so two
 * reapers, or a run that was only slow, never both write.
 */
export class Reaper {
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<number> | undefined;

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    /** Whether the run is one of this process (it ends itself). */
    private readonly isLocal: (runId: string) => boolean,
    private readonly options: ReaperOptions,
    private readonly logger: Logger,
  ) {}

  /** Sweeps for lapsed leases every `intervalMs`. */
  start(): void {
    this.#timer ??= setInterval(() => {
      this.sweep().catch((err) => this.logger.warn({ err }, "could not sweep for dead runs"));
    }, this.options.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Ends the dead runs (`by`) not of this process; returns how many it ended. One sweep at a time. */
  sweep(by: DeadRunsBy = { lapsed: true }): Promise<number> {
    this.#sweeping ??= this.#sweep(by).finally(() => {
      this.#sweeping = undefined;
    });
    return this.#sweeping;
  }

  async #sweep(by: DeadRunsBy): Promise<number> {
    let ended = 0;
    for (const run of await this.store.deadRuns(by, this.options.batch ?? 100)) {
      if (this.isLocal(run.runId)) continue;
      try {
        if (await this.end(run, by)) ended++;
      } catch (err) {
        this.logger.warn({ err, sessionId: run.sessionId, runId: run.runId }, "could not end a dead run");
      }
    }
    return ended;
  }

  /** Ends `runId` if it still holds the session and its lease lapsed; false when it is alive, local or already ended. */
  async endIfLapsed(sessionId: string, runId: string): Promise<boolean> {
    if (this.isLocal(runId)) return false;
    const [run] = await this.store.deadRuns({ lapsed: true }, 1, sessionId);
    if (run?.runId !== runId) return false;
    return this.end(run, { lapsed: true });
  }

  /** Writes the dead run's closing events; false when it was not dead `by` any more (alive, or ended by someone else). */
  async end(run: DeadRun, by: DeadRunsBy): Promise<boolean> {
    const open = await this.store.openToolUses(run.sessionId, run.runId);
    const closing: NewEvent[] = [
      ...open.map((toolUseId) => ({
        type: "tool_result" as const,
        content: TOOL_INTERRUPTED,
        toolUseId,
        isError: true,
      })),
      { type: "error", content: RUN_INTERRUPTED },
    ];
    const createdAt = new Date();
    const events: SessionEvent[] = closing.map((e, i) => ({
      seq: run.lastSeq + 1 + i,
      type: e.type,
      content: e.content ?? "",
      tokensIn: 0,
      tokensOut: 0,
      toolUseId: e.toolUseId ?? "",
      isError: e.isError ?? false,
      createdAt,
      runId: run.runId,
    }));
    try {
      await this.store.storeEvents(run.sessionId, run.runId, events, { release: true, ifDead: by });
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.Aborted) return false;
      throw err;
    }
    this.logger.warn(
      { sessionId: run.sessionId, runId: run.runId, interruptedToolCalls: open.length },
      "ended a run whose server stopped",
    );
    // Followers here learn of it now (this process's own notification is skipped).
    this.hub.changed(run.sessionId);
    this.options.onEnded?.(run);
    return true;
  }
}
