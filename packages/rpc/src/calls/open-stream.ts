import { type ContextValues, createContextKey, type HandlerContext } from "@connectrpc/connect";

const openKey = createContextKey<Opening | undefined>(undefined, { description: "opens the response stream" });

/**
 * Sends a server-streaming call's response headers now, before its first
 * message: the call is accepted. Without it they go with the first message,
 * so that a failure before it is still an HTTP status (REST) or a
 * trailers-only status (gRPC). After it, a failure ends the stream: the SSE
 * error event, or the gRPC status trailers. Served by the REST/SSE
 * transcoder and the direct gRPC path; Connect's own protocols (gRPC-Web,
 * Connect, JSON or compressed gRPC) send headers with the first message.
 */
export function openStream(ctx: HandlerContext): void {
  ctx.values.get(openKey)?.open();
}

/** Watches for openStream by the call holding `values` (set before the call starts). */
export function whenOpened(values: ContextValues): Opening {
  return new Opening(values);
}

/**
 * Whether a call opened its stream before its first read settled. Nothing
 * is left waiting once `orFirst` has settled: a call that never opens its
 * stream (an SSE follower) kept a pending promise, its resolver in the
 * call's values and a race's reactions on it for as long as it was open.
 */
export class Opening {
  #opened = false;
  #resolve: ((value?: unknown) => void) | undefined;

  constructor(private readonly values: ContextValues) {
    values.set(openKey, this);
  }

  open(): void {
    this.#opened = true;
    this.#resolve?.();
  }

  /**
   * Resolves once the stream is opened or `first` (the call's first read)
   * resolves, and rejects if `first` rejects before the opening, as a race
   * of the two would (a read that already failed comes first).
   */
  async orFirst(first: Promise<unknown>): Promise<void> {
    try {
      await new Promise<unknown>((resolve, reject) => {
        this.#resolve = resolve;
        first.then(resolve, reject);
        if (this.#opened) void Promise.resolve().then(resolve);
      });
    } finally {
      this.#resolve = undefined;
      this.values.set(openKey, undefined);
    }
  }
}
