/**
 * A call's abort, made into an AbortController only when someone asks for
 * its signal. Every direct call is aborted as it ends (callEnded, so a
 * handler's timers and listeners go), and Node makes and dispatches an
 * Event for an AbortController's abort even when nothing listens: with the
 * controller and its signal, ~9 us of a VerifyToken call's CPU that no
 * handler of it ever looks at (packages/bench/ANALYSIS.md). A signal asked
 * for before the abort aborts as an AbortController's would (its listeners
 * run in abort()); one asked for after it is already aborted, with the same
 * reason. `onAbort`, when set, runs after the signal's listeners.
 */
export class CallController {
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown = undefined;
  /** The call's own reaction to its abort (one: the direct transport's pending answer). */
  onAbort: ((reason: unknown) => void) | undefined = undefined;

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** Whether the signal was made (someone asked for it). */
  get signalMade(): boolean {
    return this.#controller !== undefined;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** The abort's reason (undefined until aborted). */
  get reason(): unknown {
    return this.#reason;
  }

  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
    this.#controller?.abort(this.#reason);
    const onAbort = this.onAbort;
    this.onAbort = undefined;
    onAbort?.(this.#reason);
  }
}

/**
 * A caller's CallController that the direct transport may make the call's
 * own (one controller a call instead of a second one linked to the
 * caller's signal, with its listener). Offered only by callers that abort it
 * themselves through the controller and do not mind the call aborting it
 * too: when the call ends (callEnded) or reaches its deadline. A caller may
 * also hand it to the transport in place of a signal (DirectTransport), so
 * no signal is made unless the call asks for one.
 *
 * Kept in a WeakMap by signal rather than as a symbol property of the
 * signal: an AbortSignal is made with its prototype set afterwards, so a
 * property added to it was a slow store and a slow read (~1.8 us an
 * offer and adoption here, against ~0.6 us for the map's set, get and
 * delete). An offer nobody adopts goes with its signal.
 */
const offered = new WeakMap<AbortSignal, CallController>();

export function offerController(controller: CallController): void {
  offered.set(controller.signal, controller);
}

/** The controller offered with `signal`, taken (a second call with the same signal gets none). */
export function adoptController(signal: AbortSignal | undefined): CallController | undefined {
  if (signal === undefined) return undefined;
  const controller = offered.get(signal);
  if (controller) offered.delete(signal);
  return controller;
}
