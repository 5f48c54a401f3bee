/** What a shutdown cancels: a function, or an object (one per open call, without a closure). */
export type ShutdownHook = (() => void) | { onShutdown(): void };

/**
 * What to cancel when a shutdown stops waiting for in-flight requests. A Set
 * rather than listeners on one AbortSignal: EventTarget compares each new
 * listener with every one already there, so with thousands of open streams
 * each new request paid for all the others.
 */
export class ShutdownHooks {
  readonly #hooks = new Set<ShutdownHook>();
  #fired = false;

  /** Registers `fn`; the returned function unregisters it. Runs `fn` at once after a shutdown. */
  add(fn: () => void): () => void {
    this.attach(fn);
    return () => this.detach(fn);
  }

  /** Registers `hook` until `detach(hook)`; runs it at once after a shutdown. */
  attach(hook: ShutdownHook): void {
    if (this.#fired) run(hook);
    else this.#hooks.add(hook);
  }

  detach(hook: ShutdownHook): void {
    this.#hooks.delete(hook);
  }

  fire(): void {
    this.#fired = true;
    for (const hook of [...this.#hooks]) run(hook);
    this.#hooks.clear();
  }
}

function run(hook: ShutdownHook): void {
  if (typeof hook === "function") hook();
  else hook.onShutdown();
}
