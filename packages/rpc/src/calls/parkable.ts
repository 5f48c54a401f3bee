/** Told once a parked stream's next() has something to give: an item, its end or its failure. */
export interface Waiter {
  wake(): void;
}

/**
 * A stream that can wait for its next item on a callback instead of a
 * pending next(). An idle SSE follower (thousands a process) waited on a
 * pending read at every layer between the relay and the follow (the relay,
 * the call's output, its outcome, the handler's turns, the follow's groups
 * and its generator): a promise each, with its reaction, two closures, a
 * context and, under async_hooks, two async ids, ~2 KiB a stream. Parked, it
 * holds the waiter where the event will arrive, and nothing pending above.
 */
export interface Parkable {
  /**
   * True: `waiter.wake()` is called once next() has something (it may also
   * be called when it turns out not to: next() then waits as usual). False:
   * not parked (something is at hand, or this layer cannot tell): call next().
   */
  park(waiter: Waiter): boolean;
  /**
   * Optional. True when the stream watches `signal` itself: once it aborts,
   * a parked waiter is woken and a pending next() settles (its end, or an
   * item already on its way) without waiting for anything else. A layer
   * above parked on it then keeps no abort listener of its own for the same
   * signal: an idle SSE follower held two (the call's output and the
   * follow's), each a Listener with its callback closure and context.
   */
  endsOnAbort?(signal: AbortSignal): boolean;
}

/** `it` as a Parkable, when it is one. */
export function parkableOf(it: object | undefined): Parkable | undefined {
  return typeof (it as Partial<Parkable> | undefined)?.park === "function" ? (it as Parkable) : undefined;
}

/** Whether `it` watches `signal` itself (Parkable.endsOnAbort): what a layer forwarding park() forwards too. */
export function endsOnAbort(it: object | undefined, signal: AbortSignal): boolean {
  return parkableOf(it)?.endsOnAbort?.(signal) ?? false;
}
