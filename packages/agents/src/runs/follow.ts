import { setImmediate as nextTurn } from "node:timers/promises";
import { PlatformError } from "@platform/errors";
import type { Parkable, Waiter } from "@platform/rpc";
import { isTerminal, type SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import type { EventHub, Listener, LogState } from "./hub.ts";
import type { Reaper } from "./reaper.ts";

export type FollowOptions = {
  signal?: AbortSignal;
  /**
   * Follow this run (the one a send just started) to its terminal event
   * instead of the session's active run; with neither, replay and close.
   */
  runId?: string;
  /**
   * Follow a queued send (the seq of its `message_queued` event, which
   * `after` must precede): that event, then only the events of the run
   * that takes it (its messages name it), to that run's terminal event.
   */
  queuedSeq?: number;
};

type Poll = { timer: NodeJS.Timeout; followers: number; busy: boolean };

/**
 * Stored events read at a time when a follower catches up with the log: small
 * enough that the first event of a replay does not wait for a big read; one
 * query per 250 events costs little beside writing them. A replay holds about
 * one page: its live heap stays ~3-5 MiB and its RSS grows 1-25 B an event
 * whatever the log's length (bench curve-session-log), as long as the rows
 * die young (pg's callback form: PreparingPool in @platform/db says why).
 * Pages of 64 were slower (30.6 vs 21.6 µs/event).
 */
const REPLAY_PAGE = 250;
/**
 * The first read of a follow: what a client waits for before its first event.
 * A full page there made the first event of a long log ~2.5× slower than that
 * of a 10-event one (9 vs 3.6 ms: 250 rows read and parsed before the first
 * is written).
 */
const FIRST_PAGE = 16;
/**
 * The second read, made while the client takes the first page: the pages
 * grow to full ones only as the client keeps reading. A client that leaves
 * after the first events (a reconnect, a look at the start of a log) still
 * has the read in flight when its close is seen, and that read's rows are
 * parsed on the service's thread before the next request's turn: with a
 * full page second, the bench's time to a first event (streams opened one
 * after the other, each closed at its first event) was a step slower for any
 * log longer than one page (PGlite, interleaved: 19.5 ms after a closed
 * replay vs 5.0 ms after one that ended by itself).
 */
const SECOND_PAGE = 64;
/** Events published to a follower that it may hold before it reads the log instead. */
const INBOX_LIMIT = 1000;

/**
 * Streams a session's events to its followers: the stored ones, then live
 * ones until the terminal event of the session's active run. With no active
 * run it replays and closes. The log is the source of truth: any gap in what
 * arrived in-process is read back from the database, so a follower never
 * skips or repeats a seq.
 *
 * An idle follower costs no work: a run of this process publishes every
 * event (and its end) through the hub; for a run on another replica, its
 * notifications wake the followers, and one poll per session (not per
 * follower) catches a missed notification or a replica that died mid-run:
 * a run whose lease lapsed without its terminal event is ended there and
 * then (Reaper), so its followers get that end instead of silence.
 */
export class Followers {
  readonly #polls = new Map<string, Poll>();

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    /** How often a session followed here re-reads its state while another replica runs it. */
    private readonly pollMs: number,
    private readonly reaper?: Reaper,
    /** Hands a free session's queue to a run (Runner.dispatch): a follower of a queued send nudges it. */
    private readonly dispatch?: (orgId: string, sessionId: string) => Promise<void>,
  ) {}

  /** The session's events after `after`, one at a time (see FollowStream). */
  follow(orgId: string, sessionId: string, after: number, options: FollowOptions = {}): FollowStream {
    return new FollowStream(this.#pages(orgId, sessionId, after, options), options.signal);
  }

  /**
   * The events to relay, in the groups they came in: the part of a page of
   * the stored log, or of the events a store published, that the follower
   * shows (never empty); or, when it has nothing to relay, its FollowerBox:
   * the follower idles (FollowStream waits on the box) until it is resumed.
   */
  async *#pages(
    orgId: string,
    sessionId: string,
    after: number,
    options: FollowOptions,
  ): AsyncGenerator<SessionEvent[] | FollowerBox, void, undefined> {
    const { store } = this;
    // What arrives while the follower waits, and what it has relayed (see FollowerBox).
    const box = new FollowerBox(after, options.runId);
    const { queuedSeq } = options;
    const queued = queuedSeq !== undefined;
    // A queued send's follower shows its own `message_queued` and its run, nothing of the runs before.
    // (Other followers show everything and make no closure for it.)
    const shown = queued
      ? (e: SessionEvent): boolean => {
          if (e.queuedSeq === queuedSeq) box.runId = e.runId;
          return e.seq === queuedSeq || (box.runId !== undefined && e.runId === box.runId);
        }
      : undefined;
    // Before the read: an event is either in the log read below or published after this.
    this.hub.join(sessionId, box);
    options.signal?.addEventListener("abort", box, { once: true });
    let watched: Poll | undefined;
    // This frame stays suspended for as long as the follower waits: the pages
    // read and the last event relayed are let go before that (in `let`s
    // cleared below) rather than held by each idle follower.
    let event: SessionEvent | undefined;
    let read: Awaited<ReturnType<Store["readLog"]>>;
    // What is relayed next, a group at a time; `ended`: it ends with the followed run's terminal event.
    let out: SessionEvent[] | undefined;
    let ended = false;
    try {
      read = await store.readLog(orgId, sessionId, box.last, FIRST_PAGE);
      if (!read) throw PlatformError.notFound("session not found");
      const lapsedRunId = read.session.lapsedRunId;
      if (!queued) box.runId ??= read.session.activeRunId ?? lapsedRunId;
      // The stored log in pages: a long one is never one big read and parse.
      let page: SessionEvent[] | undefined = read.events;
      read = undefined;
      for (let asked = FIRST_PAGE; ; ) {
        out = [];
        for (event of page) {
          if (!shown || shown(event)) out.push(event);
          box.last = event.seq;
          if (box.runId && event.runId === box.runId && isTerminal(event)) {
            ended = true;
            break;
          }
        }
        if (out.length > 0) yield out;
        out = undefined;
        if (ended) return;
        if (page.length < asked) break;
        // A turn first: the events relayed so far are written before the
        // next read (a read on PGlite runs on this thread, and the relay
        // writes a burst at the end of its microtasks, so the first events of
        // a long log waited for the second page's read and parse); and a
        // follower whose client left meanwhile reads no more.
        page = undefined;
        await nextTurn();
        if (options.signal?.aborted) return;
        asked = asked === FIRST_PAGE ? SECOND_PAGE : REPLAY_PAGE;
        page = (await store.readLog(orgId, sessionId, box.last, asked))?.events;
        if (!page) return;
      }
      page = undefined;
      event = undefined;
      if (!box.runId && !queued) return;
      // A dead run: the loop's read ends it. A queued send not taken yet: the loop's read sees who should take it.
      if (lapsedRunId === box.runId || (queued && !box.runId)) box.dirty = true;
      watched = this.#watch(orgId, sessionId);
      while (!options.signal?.aborted) {
        let fresh: SessionEvent[] | undefined;
        const arrived = box.inbox.splice(0).filter((e) => e.seq > box.last);
        if (!box.dirty && arrived.length > 0 && arrived.every((e, i) => e.seq === box.last + 1 + i)) {
          fresh = arrived;
        } else if (!box.dirty && arrived.length === 0) {
          event = undefined;
          read = undefined;
          // Idle: suspended at a yield, not an await, so nothing is pending while the follower waits;
          // FollowStream resumes it once the box has news (an event, a change, the abort).
          yield box;
          continue;
        } else {
          // A gap or a change elsewhere: the log decides, a page at a time
          // (a full page: read on after it).
          box.dirty = false;
          read = await store.readLog(orgId, sessionId, box.last, REPLAY_PAGE);
          if (!read) return;
          fresh = read.events;
          if (fresh.length === REPLAY_PAGE) box.dirty = true;
          const taker = queued && !box.runId ? fresh.find((e) => e.queuedSeq === queuedSeq)?.runId : box.runId;
          if (queued && !taker) {
            // Not taken yet: a dead holder is ended here (that hands the queue on), a free session is
            // handed its queue; a live holder or a pause takes it when it ends.
            const lapsed = read.session.lapsedRunId;
            if (lapsed && this.reaper) {
              if (await this.reaper.endIfLapsed(sessionId, lapsed).catch(() => false)) box.dirty = true;
            } else if (!lapsed && !read.session.activeRunId && fresh.length === 0) {
              await this.dispatch?.(orgId, sessionId);
            }
          }
          const ended = fresh.some((e) => e.runId === taker && isTerminal(e));
          if (!taker) {
            // Waiting for the run that takes the queued send.
          } else if (!ended && read.session.lapsedRunId === taker && this.reaper) {
            // Its replica died: end it, then read its end (or another reaper's).
            const reaped = await this.reaper.endIfLapsed(sessionId, taker).catch(() => false);
            if (reaped) box.dirty = true;
          } else if (!ended && fresh.length === 0 && read.session.activeRunId !== taker) {
            // Released without a terminal event: nothing more will come.
            return;
          }
        }
        out = [];
        for (event of fresh) {
          if (!shown || shown(event)) out.push(event);
          box.last = event.seq;
          if (
            isTerminal(event) &&
            ((box.runId !== undefined && event.runId === box.runId) || (!queued && event.runId === undefined))
          ) {
            ended = true;
            break;
          }
        }
        fresh = undefined;
        if (out.length > 0) yield out;
        out = undefined;
        if (ended) return;
      }
    } finally {
      options.signal?.removeEventListener("abort", box);
      if (watched) this.#unwatch(sessionId, watched);
      this.hub.leave(sessionId, box);
    }
  }

  /** Joins the session's shared poll (#unwatch leaves it: a follower holds no closure for that). */
  #watch(orgId: string, sessionId: string): Poll {
    let poll = this.#polls.get(sessionId);
    if (!poll) {
      const created: Poll = {
        timer: setInterval(() => void this.#poll(orgId, sessionId, created), this.pollMs),
        followers: 0,
        busy: false,
      };
      created.timer.unref();
      this.#polls.set(sessionId, created);
      poll = created;
    }
    poll.followers++;
    return poll;
  }

  #unwatch(sessionId: string, joined: Poll): void {
    if (--joined.followers > 0) return;
    clearInterval(joined.timer);
    if (this.#polls.get(sessionId) === joined) this.#polls.delete(sessionId);
  }

  async #poll(orgId: string, sessionId: string, poll: Poll): Promise<void> {
    // A run of this process publishes everything, including its end.
    if (poll.busy || this.hub.hasWriter(sessionId)) return;
    poll.busy = true;
    try {
      const session = await this.store.getSession(orgId, sessionId);
      this.hub.changed(
        sessionId,
        session ? { lastSeq: session.lastSeq, activeRunId: session.activeRunId } : { lastSeq: 0 },
      );
    } catch {
      // The database did not answer: the next poll asks again.
    } finally {
      poll.busy = false;
    }
  }
}

/**
 * A follower as the hub and its abort signal see it (the signal's listener:
 * handleEvent), and what its loop shares with them: the events published
 * while it waits, whether only the log can tell what changed, its wake-up,
 * the last seq relayed and the run it follows. One object whose methods are
 * its class's: as an object literal's, they were three closures per
 * follower, each holding the loop's context.
 */
class FollowerBox implements Listener {
  readonly inbox: SessionEvent[] = [];
  /** Set when the log changed in a way only the database can tell. */
  dirty = false;
  /** Set by the follow's abort. */
  aborted = false;
  /** Told (once) when the idle follower has news. */
  waiter: Waiter | undefined = undefined;

  constructor(
    public last: number,
    public runId: string | undefined,
  ) {}

  /** Whether resuming the idle follower may find something (an event, a change, its abort). */
  hasNews(): boolean {
    return this.inbox.length > 0 || this.dirty || this.aborted;
  }

  handleEvent(): void {
    this.aborted = true;
    this.#wake();
  }

  #wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.wake();
  }

  event(event: SessionEvent): void {
    // A follower that does not keep up (a slow client: the stream waits
    // for its socket to drain) holds at most a page of published events;
    // past that it drops them and reads the log again, a page at a time.
    if (this.inbox.length >= INBOX_LIMIT) {
      this.inbox.length = 0;
      this.dirty = true;
    } else this.inbox.push(event);
    this.#wake();
  }

  changed(state?: LogState): void {
    if (state && state.lastSeq <= this.last && state.activeRunId === this.runId) return;
    this.dirty = true;
    this.#wake();
  }
}

const NONE: readonly SessionEvent[] = [];

type Groups = AsyncGenerator<SessionEvent[] | FollowerBox, void, undefined>;

/**
 * A follow's events one at a time, over the groups its generator yields (a
 * page of the stored log, the events one store published). An event of the
 * group at hand is handed on at once: `nextReady()` without a promise (the
 * relay of server/loop-turns.ts takes it so), `next()` with an already
 * resolved one. A generator yielding each event cost, per event of a replay,
 * its resumption and about four promises (each through AsyncLocalStorage's
 * promise hooks); this is one. The group is let go once relayed: a waiting
 * follower holds none.
 *
 * An idle follower (its generator suspended at the yield of its box) waits
 * for a next() on a promise, or, parked (Parkable: the SSE relay), on its
 * box alone: the box's news wakes the waiter, with no promise pending
 * anywhere meanwhile.
 */
export class FollowStream implements AsyncIterableIterator<SessionEvent>, Parkable {
  readonly #groups: Groups;
  #group: readonly SessionEvent[] = NONE;
  #at = 0;
  #done = false;
  /** The box of the follower, while its generator idles at its yield. */
  #idle: FollowerBox | undefined;
  /** A park's read of the next group that failed: the next next() rejects with it. */
  #failure: { error: unknown } | undefined;
  /** The read of the next group, while one is out (a second next() waits for it, as a generator's would). */
  #reading: Promise<unknown> | undefined;

  constructor(
    groups: Groups,
    /** The follow's signal: its box listens to it (the follow ends once it aborts). */
    private readonly signal?: AbortSignal,
  ) {
    this.#groups = groups;
  }

  /**
   * Parkable.endsOnAbort: its own signal's abort wakes a parked waiter (the
   * box's news) and ends the follow (done) after any read in flight, so the
   * relay above it (the direct transport's call output) needs no abort
   * listener of its own on that signal.
   */
  endsOnAbort(signal: AbortSignal): boolean {
    return signal === this.signal;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The next event if it is at hand (undefined: next() would wait). */
  nextReady(): SessionEvent | undefined {
    if (this.#reading || this.#done || this.#at >= this.#group.length) return undefined;
    return this.#group[this.#at++];
  }

  /**
   * Parks `waiter` until next() has something (Parkable): on the idle
   * follower's box, or, with nothing at hand, after reading the next group
   * here (it is kept for next(); an idle follower then waits on its box).
   */
  park(waiter: Waiter): boolean {
    if (this.#reading || this.#done || this.#failure || this.#at < this.#group.length) return false;
    const idle = this.#idle;
    if (idle) {
      if (idle.hasNews()) return false;
      idle.waiter = waiter;
      return true;
    }
    this.#group = NONE;
    this.#at = 0;
    const reading = this.#groups.next().then(
      (r) => {
        this.#reading = undefined;
        if (r.done || this.#done) this.#done = true;
        else if (Array.isArray(r.value)) this.#group = r.value;
        else {
          this.#idle = r.value;
          if (!r.value.hasNews()) {
            r.value.waiter = waiter;
            return;
          }
        }
        waiter.wake();
      },
      (error: unknown) => {
        this.#reading = undefined;
        this.#done = true;
        this.#failure = { error };
        waiter.wake();
      },
    );
    this.#reading = reading;
    return true;
  }

  next(): Promise<IteratorResult<SessionEvent>> {
    if (this.#reading) return this.#reading.then(() => this.next());
    const failure = this.#failure;
    if (failure) {
      this.#failure = undefined;
      return Promise.reject(failure.error);
    }
    const ready = this.nextReady();
    if (ready !== undefined) return Promise.resolve<IteratorResult<SessionEvent>>({ done: false, value: ready });
    if (this.#done) return Promise.resolve<IteratorResult<SessionEvent>>({ done: true, value: undefined });
    const idle = this.#idle;
    if (idle && !idle.hasNews()) {
      // Waits for the box's news, then reads on.
      return new Promise<void>((resolve) => {
        idle.waiter = { wake: resolve };
      }).then(() => this.next());
    }
    this.#idle = undefined;
    this.#group = NONE;
    this.#at = 0;
    const reading = this.#groups.next().then(
      (r): IteratorResult<SessionEvent> | Promise<IteratorResult<SessionEvent>> => {
        this.#reading = undefined;
        if (r.done || this.#done) {
          this.#done = true;
          return { done: true, value: undefined };
        }
        if (!Array.isArray(r.value)) {
          // Idle now: wait for its news.
          this.#idle = r.value;
          return this.next();
        }
        this.#group = r.value;
        this.#at = 1;
        return { done: false, value: r.value[0]! };
      },
      (e: unknown) => {
        this.#reading = undefined;
        this.#done = true;
        throw e;
      },
    );
    this.#reading = reading;
    return reading;
  }

  async return(): Promise<IteratorResult<SessionEvent>> {
    this.#done = true;
    this.#group = NONE;
    this.#idle = undefined;
    await this.#groups.return(undefined);
    return { done: true, value: undefined };
  }
}
