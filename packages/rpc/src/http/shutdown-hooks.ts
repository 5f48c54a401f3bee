/**
 * What to cancel when a shutdown stops waiting for in-flight requests. A Set
 * rather than listeners on one AbortSignal: EventTarget compares each new
 * listener with every one already there, so with thousands of open streams
 * each new request paid for all the others.
 */
export class ShutdownHooks {
  readonly #hooks = new Set<() => void>();
  #fired = false;

  /** Registers `fn`; the returned function unregisters it. Runs `fn` at once after a shutdown. */
  add(fn: () => void): () => void {
    if (this.#fired) {
      fn();
      return () => {};
    }
    this.#hooks.add(fn);
    return () => this.#hooks.delete(fn);
  }

  fire(): void {
    this.#fired = true;
    for (const fn of [...this.#hooks]) fn();
    this.#hooks.clear();
  }
}
