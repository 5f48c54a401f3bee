/**
 * A caller's AbortController that the direct transport may make the call's
 * own (one controller a call instead of a second one linked to the
 * caller's signal, with its listener). Offered only by callers that abort it
 * themselves through the controller and do not mind the call aborting it
 * too: when the call ends (callEnded) or reaches its deadline.
 *
 * Kept in a WeakMap by signal rather than as a symbol property of the
 * signal: an AbortSignal is made with its prototype set afterwards, so a
 * property added to it was a slow store and a slow read (~1.8 us an
 * offer and adoption here, against ~0.6 us for the map's set, get and
 * delete). An offer nobody adopts goes with its signal.
 */
const offered = new WeakMap<AbortSignal, AbortController>();

export function offerController(controller: AbortController): void {
  offered.set(controller.signal, controller);
}

/** The controller offered with `signal`, taken (a second call with the same signal gets none). */
export function adoptController(signal: AbortSignal | undefined): AbortController | undefined {
  if (signal === undefined) return undefined;
  const controller = offered.get(signal);
  if (controller) offered.delete(signal);
  return controller;
}
