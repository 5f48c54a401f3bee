import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { parseAuthorization } from "@platform/credentials";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import type { AuthContext } from "../domain/model.ts";
import type { Authenticator } from "../domain/ports.ts";
import { scopeOf } from "./scopes.ts";

/** The caller, set by the auth interceptor on every authenticated call. */
export const authKey = createContextKey<AuthContext | undefined>(undefined, { description: "agents caller" });

/** Services any caller may reach: health and reflection. */
const OPEN_SERVICES = new Set([
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
]);

/**
 * Verifies the bearer credential with identity on every call (no cache:
 * a revoked key stops working at once) and stores the AuthContext for the
 * handlers. Missing or invalid → unauthenticated (401).
 */
export function authInterceptor(authenticator: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (OPEN_SERVICES.has(req.service.typeName)) return next(req);
    // Exactly `Bearer <token>` with a well-formed JWT or API key
    // (@platform/credentials): a loose variant never reaches identity.
    const parsed = parseAuthorization(req.header.get("authorization"));
    if (!parsed.ok)
      throw PlatformError.unauthenticated(
        parsed.problem === "missing"
          ? "missing bearer token"
          : "the Authorization header must be exactly Bearer <token>",
      );
    const auth = await authenticator.verify(parsed.credential.token);
    // Nothing after this reads the credential (handlers get the caller from authKey), and an open
    // stream (an SSE follower) keeps the call's headers for as long as it lasts.
    req.header.delete("authorization");
    if (auth.scopes) {
      const needed = scopeOf(req.service.typeName, req.method.name);
      if (!auth.scopes.includes(needed))
        throw PlatformError.permissionDenied(
          `the API key lacks the ${needed} scope`,
          IdentityRestCode.insufficientScope,
        );
    }
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
