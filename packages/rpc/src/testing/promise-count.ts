import { createHook } from "node:async_hooks";

/**
 * The promises made in this process while `fn` runs to its settled result:
 * how tests hold a hot path to its count (each promise is an allocation and a
 * microtask, and with AsyncLocalStorage on, a hook call).
 */
export async function promisesMadeBy<T>(fn: () => Promise<T>): Promise<{ made: number; result: T }> {
  let made = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "PROMISE") made++;
    },
  }).enable();
  try {
    const result = await fn();
    return { made, result };
  } finally {
    hook.disable();
  }
}

/**
 * Promises an item costs on a path that handles n items in `run(n)`: the
 * difference between 1,010 items and 10, after a warm-up of 10, so what a
 * call costs once (setup, the end of the stream) cancels out.
 */
export async function promisesPerItem(run: (n: number) => Promise<void>): Promise<number> {
  await run(10);
  const many = await promisesMadeBy(() => run(1010));
  const few = await promisesMadeBy(() => run(10));
  return (many.made - few.made) / 1000;
}
