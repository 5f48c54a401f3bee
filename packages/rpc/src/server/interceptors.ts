import type { Interceptor } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { currentRequest, type RequestInfo, requestInfoKey } from "../context.ts";
import { boundConnectError, boundPlatformError } from "../error-bounds.ts";
import { carryPlatformError, toConnectError } from "../errors.ts";
import { isPlatformStatus } from "../platform-status.ts";
import { watchCall } from "./watch-call.ts";

/**
 * Outermost interceptor of every server: turns whatever a handler or an
 * inner interceptor throws into a ConnectError with an ErrorInfo detail.
 * Unexpected exceptions are logged with the request id and leave as a bare
 * `internal`; so does an internal/unknown ConnectError that no platform
 * service raised (e.g. Connect wrapping a TypeError from a client call: its
 * message is JavaScript's, not ours). Every error leaves with its message
 * and ErrorInfo within the bounds of error-bounds.ts, and one made from a
 * PlatformError carries it (bounded) for the REST transcoder to render.
 */
export function errorInterceptor(fallback: Logger): Interceptor {
  const convert = errorConverter(fallback);
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    return watchCall(
      () => next(req),
      (e) => convert(e, procedure, req.contextValues.get(requestInfoKey)),
    );
  };
}

/**
 * What errorInterceptor throws in place of `e`, thrown by a call of
 * `procedure` (service/method); logged with the call's request ids.
 */
export function errorConverter(
  fallback: Logger,
): (e: unknown, procedure: string, info: RequestInfo | undefined) => ConnectError {
  return (e, procedure, info) => {
    const log = (info ?? currentRequest())?.logger ?? fallback;
    let p: PlatformError;
    if (e instanceof ConnectError) {
      // Connect's own and relayed platform statuses travel as they are.
      if ((e.code !== 13 && e.code !== 2) || isPlatformStatus(e)) return boundConnectError(e);
      log.error({ err: e, procedure }, "unhandled error in handler");
      p = PlatformError.internal(undefined, e);
    } else {
      if (!(e instanceof PlatformError)) {
        log.error({ err: e, procedure }, "unhandled error in handler");
      } else if (e.code === 13 && e.cause !== undefined) {
        log.error({ err: e.cause, procedure, reason: e.reason }, "internal error");
      }
      p = PlatformError.from(e);
    }
    // The REST transcoder renders the PlatformError itself (errors.ts), within the same bounds.
    return carryPlatformError(boundConnectError(toConnectError(p)), boundPlatformError(p));
  };
}
