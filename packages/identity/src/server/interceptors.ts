import type { Interceptor } from "@connectrpc/connect";
import type { Identity } from "../identity.ts";
import { authInterceptor } from "./auth-interceptor.ts";
import { idempotencyInterceptor } from "./idempotency-interceptor.ts";

/**
 * In order: authenticate and authorize, then Idempotency-Key (scoped to the
 * caller). Retry-After on refusals is @platform/rpc's (toConnectError).
 */
export function identityInterceptors(identity: Identity): Interceptor[] {
  return [authInterceptor(identity.authenticator), idempotencyInterceptor(identity.idempotency)];
}
