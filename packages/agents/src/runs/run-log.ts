import { sqlState } from "@platform/db";
import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { NewEvent, SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import type { EventHub } from "./hub.ts";

/** Why a run's log stopped taking events before its terminal event was stored. */
export type LogFailure =
  /** Another run or a takeover (runs/reaper.ts) owns the session's log now. */
  | { kind: "lost"; error: unknown }
  /** The database rejected an event (not an outage): the run cannot go on. */
  | { kind: "rejected"; error: unknown };

export type RunLogOptions = {
  /** First wait before storing again after a failure; doubles up to `maxRetryMs`. */
  retryMs?: number;
  maxRetryMs?: number;
  /** Called once when the log stops taking events (the run should stop at once). */
  onFailure?: (failure: LogFailure) => void;
};

type Queued = { event: NewEvent; createdAt: Date };

/**
 * One run's writes to its session's log. Store first, then publish: an event
 * reaches followers only once it is in the log, so an event id (its seq) a
 * client has seen always names that event, through crashes and database
 * outages alike. Writes are grouped: while one store call is out, the events
 * that arrive queue up and go in the next call (one round trip for many text
 * fragments under load, one per fragment when idle).
 *
 * The run holds the session, so it numbers its own events, at store time
 * (from the log's end). While the database is unreachable the queue waits
 * and the store is retried with backoff; nothing is published, so nothing
 * a client sees can be contradicted later. Events never published can be
 * renumbered or dropped without anyone having seen them: when the run lost
 * the session (a takeover wrote the log's end) or the database rejected an
 * event, the queue is dropped and `onFailure` tells the run to stop.
 */
export class RunLog {
  /** The log's end: the last seq stored by this run (or before it). */
  #lastSeq: number;
  /** Not stored yet, so not published, in order. */
  readonly #queue: Queued[] = [];
  /** The queue ends with the run's terminal events (they free the session when stored). */
  #terminal = 0;
  #pump: Promise<void> | undefined;
  #state: "open" | "failed" | "abandoned" | "closed" = "open";
  #failure: LogFailure | undefined;
  /** Cuts a retry's backoff short (abandon). */
  #wakeRetry: (() => void) | undefined;
  readonly #detach: () => void;
  readonly #retryMs: number;
  readonly #maxRetryMs: number;

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    private readonly sessionId: string,
    private readonly runId: string,
    lastSeq: number,
    private readonly logger: Logger,
    private readonly options: RunLogOptions = {},
  ) {
    this.#lastSeq = lastSeq;
    this.#retryMs = options.retryMs ?? 100;
    this.#maxRetryMs = options.maxRetryMs ?? 2000;
    this.#detach = hub.attachWriter(sessionId);
  }

  /** Queues the events; each is published as soon as it is stored. Ignored once the log failed. */
  publish(events: readonly NewEvent[]): void {
    if (this.#state !== "open" || this.#terminal > 0) return;
    const createdAt = new Date();
    for (const event of events) this.#queue.push({ event, createdAt });
    void this.#kick();
  }

  /** The seq the next queued event will get (if everything queued before it is stored). */
  get nextSeq(): number {
    return this.#lastSeq + this.#queue.length + 1;
  }

  /**
   * Resolves once everything queued so far is stored (and published). While
   * the database is down it waits; rejects when the log failed, was
   * abandoned, when `signal` aborts, or after `patienceMs` (then with
   * `unavailable`; the queue stays and is still stored later).
   */
  async flush(signal?: AbortSignal, patienceMs?: number): Promise<void> {
    const pump = this.#kick();
    const waits: Array<Promise<unknown>> = [pump];
    const cleanup: Array<() => void> = [];
    if (signal) {
      waits.push(
        new Promise((_, reject) => {
          if (signal.aborted) reject(signal.reason);
          const onAbort = () => reject(signal.reason);
          signal.addEventListener("abort", onAbort, { once: true });
          cleanup.push(() => signal.removeEventListener("abort", onAbort));
        }),
      );
    }
    if (patienceMs !== undefined) {
      waits.push(
        new Promise((_, reject) => {
          const timer = setTimeout(
            () => reject(PlatformError.unavailable("the database did not answer; the run's events are not stored yet")),
            patienceMs,
          );
          cleanup.push(() => clearTimeout(timer));
        }),
      );
    }
    try {
      await Promise.race(waits);
    } finally {
      for (const c of cleanup) c();
    }
    this.#check();
  }

  /**
   * Stores what is queued plus the terminal events, freeing the session in
   * the same statement, then publishes them: whoever sees the terminal event
   * can send the next message. Returns false when they were not stored
   * because the run lost the session (its end is someone else's to write)
   * or the log was abandoned (the lease will lapse; a takeover ends it).
   */
  async finish(terminal: readonly NewEvent[]): Promise<boolean> {
    if (this.#state === "failed" && this.#failure?.kind === "rejected") {
      // Nothing queued was published: the terminal events alone end the run.
      this.#state = "open";
      this.#failure = undefined;
    }
    if (this.#state === "open") {
      const createdAt = new Date();
      for (const event of terminal) this.#queue.push({ event, createdAt });
      this.#terminal = terminal.length;
      await this.#kick();
    }
    const stored = this.#state === "closed";
    if (!stored) this.#close();
    return stored;
  }

  /** Stops storing (shutdown with the database down): what is queued was never published and is dropped. */
  abandon(): void {
    if (this.#state !== "open") return;
    this.#state = "abandoned";
    this.#wakeRetry?.();
  }

  #check(): void {
    if (this.#state === "failed") throw this.#failure?.error ?? PlatformError.internal("the run's log failed");
    if (this.#state === "abandoned") throw PlatformError.unavailable("the run's log was abandoned");
  }

  #kick(): Promise<void> {
    this.#pump ??= this.#drain().finally(() => {
      this.#pump = undefined;
    });
    return this.#pump;
  }

  async #drain(): Promise<void> {
    let wait = this.#retryMs;
    let outage = false;
    while (this.#queue.length > 0 && this.#state === "open") {
      const count = this.#queue.length;
      const release = this.#terminal > 0;
      const batch = this.#queue.slice(0, count).map((q, i) => this.#number(q, this.#lastSeq + 1 + i));
      try {
        await this.store.storeEvents(this.sessionId, this.runId, batch, { release });
      } catch (err) {
        if (this.#state !== "open") return;
        const moved = movedTo(err);
        if (moved !== undefined) {
          // A queued send took the next seq: nothing of the batch was published, number it after that.
          this.#lastSeq = moved;
          continue;
        }
        if (isLost(err)) return this.#fail({ kind: "lost", error: err });
        if (isRejected(err)) {
          if (release && this.#queue.length > this.#terminal) {
            // Store the end of the run without the event the database refused.
            this.#queue.splice(0, this.#queue.length - this.#terminal);
            continue;
          }
          return this.#fail({ kind: "rejected", error: err });
        }
        if (!outage)
          this.logger.warn(
            { err, queued: count },
            "could not store the run's events; retrying until the database answers",
          );
        outage = true;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.#wakeRetry = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.#wakeRetry = undefined;
        wait = Math.min(wait * 2, this.#maxRetryMs);
        continue;
      }
      if (outage) this.logger.info({ stored: count }, "stored the run's events again");
      outage = false;
      wait = this.#retryMs;
      this.#queue.splice(0, count);
      this.#lastSeq += count;
      if (release) this.#state = "closed";
      this.hub.publish(this.sessionId, batch);
    }
    if (this.#state === "closed") this.#close();
  }

  #fail(failure: LogFailure): void {
    this.#state = "failed";
    this.#failure = failure;
    this.#queue.length = 0;
    this.#terminal = 0;
    this.logger.warn({ err: failure.error, kind: failure.kind }, "the run's log stopped taking events");
    // Followers here wait for a terminal event of this run: the log decides now.
    this.hub.changed(this.sessionId);
    this.options.onFailure?.(failure);
  }

  #number(queued: Queued, seq: number): SessionEvent {
    const { event } = queued;
    return {
      seq,
      type: event.type,
      content: withoutNul(event.content ?? ""),
      tokensIn: event.tokensIn ?? 0,
      tokensOut: event.tokensOut ?? 0,
      toolUseId: withoutNul(event.toolUseId ?? ""),
      isError: event.isError ?? false,
      createdAt: queued.createdAt,
      runId: this.runId,
      ...(event.queuedSeq !== undefined ? { queuedSeq: event.queuedSeq } : {}),
    };
  }

  #close(): void {
    if (this.#state === "open") this.#state = "closed";
    this.#queue.length = 0;
    this.#detach();
  }
}

/** The log's end when a queued send moved it while this run held the session (storeEvents' `log_moved`). */
function movedTo(err: unknown): number | undefined {
  if (!(err instanceof PlatformError) || err.reason !== "log_moved") return undefined;
  const seq = Number(err.extra.lastSeq);
  return Number.isSafeInteger(seq) ? seq : undefined;
}

/** The store refused because this run no longer holds the session or the log moved on (storeEvents). */
function isLost(err: unknown): boolean {
  return err instanceof PlatformError && err.code === Code.Aborted;
}

/**
 * The database refused the statement for what it holds (data, constraint,
 * statement or limit error): storing it again cannot succeed. Anything else
 * (refused or cut connections, a server restarting, a full pool) is an
 * outage, and the store is retried.
 */
function isRejected(err: unknown): boolean {
  const state = sqlState(err);
  return state !== undefined && /^(22|23|42|54)/.test(state);
}

/** PostgreSQL text cannot hold U+0000; a model or a tool can produce it. */
function withoutNul(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\uFFFD") : text;
}
