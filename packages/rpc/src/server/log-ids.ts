import type { Logger } from "pino";
import { currentRequest } from "../context.ts";

/**
 * A pino `mixin` for every service logger: a line written while a request is
 * being served (its handler, the interceptors, a run it started) carries
 * that request's requestId and traceId, whichever logger wrote it. A logger
 * already bound to a request id (the request's child logger, or a child
 * made with one) is left as it is, so a line never names two requests.
 * (bindings() and not pino's symbols: services may run another pino major.)
 */
export function requestIdsMixin(_line: object, _level: number, logger?: unknown): object {
  const info = currentRequest();
  if (!info || "requestId" in ((logger as Pick<Logger, "bindings"> | undefined)?.bindings() ?? {})) return {};
  return { requestId: info.requestId, traceId: info.traceId };
}
