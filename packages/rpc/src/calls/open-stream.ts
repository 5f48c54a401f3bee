import { type ContextValues, createContextKey, type HandlerContext } from "@connectrpc/connect";

const openKey = createContextKey<(() => void) | undefined>(undefined, { description: "opens the response stream" });

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
  ctx.values.get(openKey)?.();
}

export const OPENED: unique symbol = Symbol("opened");

/** Resolves with OPENED once the call holding `values` calls openStream. */
export function whenOpened(values: ContextValues): Promise<typeof OPENED> {
  return new Promise((resolve) => {
    values.set(openKey, () => resolve(OPENED));
  });
}
