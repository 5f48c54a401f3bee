import { setImmediate as nextTurn } from "node:timers/promises";

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
export async function* withLoopTurns<T>(
  source: AsyncIterable<T>,
  options: { maxItems?: number; sliceMs?: number } = {},
): AsyncGenerator<T> {
  const maxItems = options.maxItems ?? 256;
  const sliceMs = options.sliceMs ?? 5;
  let items = 0;
  for await (const item of source) {
    openSlice();
    yield item;
    if (++items >= maxItems || sliceSpent() >= sliceMs) {
      await nextTurn();
      items = 0;
    }
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
