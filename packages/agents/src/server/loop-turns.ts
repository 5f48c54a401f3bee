import { setImmediate as nextTurn } from "node:timers/promises";
import { endsOnAbort, type Parkable, parkableOf, type Waiter } from "@platform/rpc";

// The slice is the process's, not each relay's: with every relay yielding
// after its own 5 ms, twenty concurrent replays and replies put 100 ms of
// relaying into one turn, and a health probe or a new connection (one
// accepted a turn) waits for all of it. Measured under the mixed-load bench
// figure: the agents event-loop delay p99 was 80-125 ms. The first relay to
// work in a turn opens the slice; once it is spent, each relay hands on
// after its current item (so every relay still moves at least one item a
// turn), and the slice reopens at the turn's check phase.
let sliceStart = -1;

/** Starts the turn's shared slice if none is open (at the next check phase a new one may start). */
function openSlice(): void {
  if (sliceStart >= 0) return;
  sliceStart = performance.now();
  setImmediate(() => {
    sliceStart = -1;
  });
}

/** Milliseconds of the open slice spent so far. */
function sliceSpent(): number {
  return sliceStart < 0 ? 0 : performance.now() - sliceStart;
}

/**
 * Bounds the synchronous work of relaying a stream. A replay of a long log
 * (thousands of stored events) is an array the consumer drains through
 * promise callbacks only; the RPC layer frames and buffers each event
 * without waiting for the socket, so the whole replay would run as one task
 * and every other request of the process (health probes included) would wait
 * for it. Passing the items through here gives the event loop a turn after
 * every `maxItems` items or `sliceMs` of work, whichever comes first.
 */
export function withLoopTurns<T>(
  source: AsyncIterable<T>,
  options: { maxItems?: number; sliceMs?: number } = {},
): AsyncIterableIterator<T> {
  return relayInTurns(
    async () => source,
    (item) => item,
    options,
  );
}

/**
 * A server stream's messages: `open()` (on the first read) gives the
 * domain's stream, whose items leave through `map`, with the turns of
 * withLoopTurns. An iterator object, not an async generator: an idle stream
 * (an SSE follower waiting for events) would keep a generator suspended, with
 * its frame, the handler's request and context and the last item, for as
 * long as it is open; this holds the source and its own few fields.
 */
export function relayInTurns<T, R>(
  open: () => Promise<AsyncIterable<T>>,
  map: (item: T) => R,
  options: { maxItems?: number; sliceMs?: number } = {},
): AsyncIterableIterator<R> {
  return new TurnsRelay(open, map, options.maxItems ?? 256, options.sliceMs ?? 5);
}

/**
 * A source that can hand on the items it has at hand without waiting
 * (runs/follow.ts FollowStream): undefined when its next item would be
 * waited for. Its items are never undefined.
 */
export interface ReadyItems<T> {
  nextReady(): T | undefined;
}

function readyItems<T>(it: AsyncIterator<T>): ReadyItems<T> | undefined {
  return typeof (it as Partial<ReadyItems<T>>).nextReady === "function" ? (it as unknown as ReadyItems<T>) : undefined;
}

class TurnsRelay<T, R> implements AsyncIterableIterator<R>, Parkable {
  #open: (() => Promise<AsyncIterable<T>>) | undefined;
  #source: Promise<AsyncIterator<T>> | undefined;
  /** The source, once open: read directly, without a promise more per item. */
  #it: AsyncIterator<T> | undefined;
  /** The source's items at hand, when it can tell (then an item at hand costs one promise, the answer's). */
  #ready: ReadyItems<T> | undefined;
  #finished = false;
  /** Items relayed since the last turn; -1 before the first. */
  #items = -1;

  constructor(
    open: () => Promise<AsyncIterable<T>>,
    private readonly map: (item: T) => R,
    private readonly maxItems: number,
    private readonly sliceMs: number,
  ) {
    this.#open = open;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Parks on the open source when it can (Parkable): an idle follower waits so, without a pending read here. */
  park(waiter: Waiter): boolean {
    return !this.#finished && this.#it !== undefined && (parkableOf(this.#it)?.park(waiter) ?? false);
  }

  /** Whether the open source watches `signal` itself (Parkable.endsOnAbort: a follow, its own signal). */
  endsOnAbort(signal: AbortSignal): boolean {
    return !this.#finished && endsOnAbort(this.#it, signal);
  }

  next(): Promise<IteratorResult<R>> {
    if (this.#finished) return Promise.resolve({ done: true, value: undefined });
    // The turn after the previous item, once its consumer is back for more (as a generator would resume).
    if (this.#items >= 0 && (++this.#items >= this.maxItems || sliceSpent() >= this.sliceMs)) {
      this.#items = 0;
      return nextTurn().then(() => this.#pull());
    }
    return this.#pull();
  }

  #start(): Promise<AsyncIterator<T>> {
    const open = this.#open!;
    // What the opening needed (the handler's request and context) is not kept.
    this.#open = undefined;
    return open().then((s) => s[Symbol.asyncIterator]());
  }

  #pull(): Promise<IteratorResult<R>> {
    let read: Promise<IteratorResult<T>>;
    if (this.#it) {
      try {
        const ready = this.#ready?.nextReady();
        if (ready !== undefined) return Promise.resolve(this.#relay(ready));
        read = this.#it.next();
      } catch (e) {
        this.#finished = true;
        return Promise.reject(e);
      }
    } else {
      this.#source ??= this.#start();
      read = this.#source.then((it) => {
        this.#it = it;
        this.#ready = readyItems(it);
        // Read directly from now on; the settled promise is not kept for the stream's life.
        this.#source = undefined;
        return it.next();
      });
    }
    return read.then(
      (r): IteratorResult<R> => {
        if (r.done) {
          this.#finished = true;
          return { done: true, value: undefined };
        }
        return this.#relay(r.value);
      },
      (e: unknown) => {
        this.#finished = true;
        throw e;
      },
    );
  }

  /** An item read from the source, mapped (a map that throws closes the source and fails the read). */
  #relay(item: T): IteratorResult<R> {
    openSlice();
    if (this.#items < 0) this.#items = 0;
    try {
      return { done: false, value: this.map(item) };
    } catch (e) {
      // As a generator's loop would: the source is closed, the error is the read's.
      void this.return();
      throw e;
    }
  }

  async return(): Promise<IteratorResult<R>> {
    this.#finished = true;
    this.#open = undefined;
    const it = this.#it;
    const source = this.#source;
    if (it) await it.return?.();
    else if (source) await (await source.catch(() => undefined))?.return?.();
    return { done: true, value: undefined };
  }
}

/** `items.map(fn)` in slices, with an event-loop turn between them (see withLoopTurns). */
export async function mapInTurns<T, R>(
  items: readonly T[],
  fn: (item: T) => R,
  options: { maxItems?: number; sliceMs?: number } = {},
): Promise<R[]> {
  const maxItems = options.maxItems ?? 256;
  const sliceMs = options.sliceMs ?? 5;
  const out: R[] = new Array(items.length);
  let inSlice = 0;
  for (let i = 0; i < items.length; i++) {
    openSlice();
    out[i] = fn(items[i]!);
    if (++inSlice >= maxItems || sliceSpent() >= sliceMs) {
      await nextTurn();
      inSlice = 0;
    }
  }
  return out;
}
