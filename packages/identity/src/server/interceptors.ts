import type { Interceptor } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { toConnectError } from "@platform/rpc";
import type { Identity } from "../identity.ts";
import { authInterceptor } from "./auth-interceptor.ts";
import { idempotencyInterceptor } from "./idempotency-interceptor.ts";

/**
 * A refusal that names when to come back (429 throttled login, 503 full
 * hashing queue) carries it as `Retry-After`: an HTTP header on REST,
 * response metadata on gRPC.
 */
export const retryAfterInterceptor: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    const seconds = err instanceof PlatformError ? err.extra.retry_after : undefined;
    if (seconds === undefined) throw err;
    const ce = toConnectError(err);
    ce.metadata.set("retry-after", seconds);
    throw ce;
  }
};

/** In order: Retry-After on refusals, authenticate and authorize, then Idempotency-Key (scoped to the caller). */
export function identityInterceptors(identity: Identity): Interceptor[] {
  return [retryAfterInterceptor, authInterceptor(identity.authenticator), idempotencyInterceptor(identity.idempotency)];
}
