import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import type { AuthContext } from "../domain/model.ts";
import type { Authenticator } from "../domain/ports.ts";

/** The caller, set by the auth interceptor on every authenticated call. */
export const authKey = createContextKey<AuthContext | undefined>(undefined, { description: "agents caller" });

/** Services any caller may reach: health and reflection. */
const OPEN_SERVICES = new Set(["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);

/**
 * Verifies the bearer credential with identity on every call (no cache:
 * a revoked key stops working at once) and stores the AuthContext for the
 * handlers. Missing or invalid → unauthenticated (401).
 */
export function authInterceptor(authenticator: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (OPEN_SERVICES.has(req.service.typeName)) return next(req);
    const header = req.header.get("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw PlatformError.unauthenticated(header ? "the Authorization header must be Bearer <token>" : "missing bearer token");
    const auth = await authenticator.verify(match[1]!);
    req.contextValues.set(authKey, auth);
    return next(req);
  };
}

export function authOf(ctx: HandlerContext): AuthContext {
  const auth = ctx.values.get(authKey);
  // Only reachable if a service is mounted without the interceptor.
  if (!auth) throw PlatformError.unauthenticated("missing bearer token");
  return auth;
}
