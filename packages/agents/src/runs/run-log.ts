import type { Logger } from "pino";
import type { NewEvent, SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import type { EventHub } from "./hub.ts";

/**
 * One run's writes to its session's log. The run holds the session, so it
 * numbers its own events (from the seq the log ended at when it took the
 * session), publishes each at once and stores them in batches: a text
 * fragment reaches followers without waiting for the database. The log stays
 * the source of truth: the stored events carry the very seqs and times that
 * were streamed, so a replay or a Last-Event-ID resume sees what the live
 * stream saw. A crash loses at most the last `flushMs` of published events
 * (a resume then continues from the log's end).
 */
export class RunLog {
  #lastSeq: number;
  /** Published, not yet stored, in seq order. */
  readonly #unstored: SessionEvent[] = [];
  /** The store calls in order: one at a time, each taking what was queued when it started. */
  #writing: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #detach: () => void;

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    private readonly sessionId: string,
    private readonly runId: string,
    lastSeq: number,
    private readonly flushMs: number,
    private readonly logger: Logger,
  ) {
    this.#lastSeq = lastSeq;
    this.#detach = hub.attachWriter(sessionId, () => this.#unstored);
  }

  /** Numbers the events, publishes them and stores them within `flushMs`. */
  publish(events: readonly NewEvent[]): SessionEvent[] {
    const createdAt = new Date();
    const numbered = events.map((e) => this.#number(e, createdAt));
    this.#unstored.push(...numbered);
    this.hub.publish(this.sessionId, numbered);
    this.#arm();
    return numbered;
  }

  /** Schedules the next batch; a failed one stays queued and is tried again. */
  #arm(): void {
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      this.flush().catch((err) => {
        this.logger.warn({ err }, "could not store the run's events; trying again");
        if (!this.#closed) this.#arm();
      });
    }, this.flushMs);
  }

  /** Resolves once everything published so far is stored; rejects when that fails (it stays queued). */
  flush(): Promise<void> {
    return this.#enqueue([]);
  }

  /** The next store call, after the ones already started: the queued events plus `terminal`. */
  #enqueue(terminal: readonly SessionEvent[]): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const write = this.#writing.catch(() => {}).then(() => this.#store(terminal));
    this.#writing = write;
    return write;
  }

  /**
   * Stores what is queued plus the terminal events, freeing the session in
   * the same statement, and only then publishes them: whoever sees the
   * terminal event can send the next message.
   */
  async finish(terminal: readonly NewEvent[]): Promise<SessionEvent[]> {
    const numbered = terminal.map((e) => this.#number(e, new Date()));
    try {
      await this.#enqueue(numbered);
    } catch (err) {
      // Nothing more will be stored: this session's followers must look at the log.
      this.#close();
      this.hub.changed(this.sessionId);
      throw err;
    }
    this.hub.publish(this.sessionId, numbered);
    this.#close();
    return numbered;
  }

  #number(event: NewEvent, createdAt: Date): SessionEvent {
    return {
      seq: ++this.#lastSeq,
      type: event.type,
      content: event.content ?? "",
      tokensIn: event.tokensIn ?? 0,
      tokensOut: event.tokensOut ?? 0,
      toolUseId: event.toolUseId ?? "",
      isError: event.isError ?? false,
      createdAt,
      runId: this.runId,
    };
  }

  async #store(terminal: readonly SessionEvent[]): Promise<void> {
    const batch = this.#unstored.slice();
    if (batch.length === 0 && terminal.length === 0) return;
    await this.store.storeEvents(this.sessionId, this.runId, [...batch, ...terminal], { release: terminal.length > 0 });
    this.#unstored.splice(0, batch.length);
  }

  #close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#unstored.length = 0;
    this.#detach();
  }
}
