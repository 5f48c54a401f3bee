/**
 * A caller's AbortController that the direct transport may make the call's
 * own (one controller a call instead of a second one linked to the
 * caller's signal, with its listener). Offered only by callers that abort it
 * themselves through the controller and do not mind the call aborting it
 * too: when the call ends (callEnded) or reaches its deadline.
 */
const owner = Symbol("the call's controller");

type Offered = AbortSignal & { [owner]?: AbortController };

export function offerController(controller: AbortController): void {
  (controller.signal as Offered)[owner] = controller;
}

/** The controller offered with `signal`, taken (a second call with the same signal gets none). */
export function adoptController(signal: AbortSignal | undefined): AbortController | undefined {
  const controller = (signal as Offered | undefined)?.[owner];
  if (controller) (signal as Offered)[owner] = undefined;
  return controller;
}
