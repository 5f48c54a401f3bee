import { setImmediate as nextTurn } from "node:timers/promises";

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
  let since = performance.now();
  for await (const item of source) {
    yield item;
    if (++items >= maxItems || performance.now() - since >= sliceMs) {
      await nextTurn();
      items = 0;
      since = performance.now();
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
  let since = performance.now();
  for (let i = 0; i < items.length; i++) {
    out[i] = fn(items[i]!);
    if ((i + 1) % maxItems === 0 || performance.now() - since >= sliceMs) {
      await nextTurn();
      since = performance.now();
    }
  }
  return out;
}
