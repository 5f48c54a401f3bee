import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { parseAuthorization } from "@platform/credentials";
import { Code, type ErrorExtra, IdentityRestCode, PlatformError } from "@platform/errors";
import { type AuthContext, actsAsOwner } from "../auth/auth-context.ts";
import type { Authenticator } from "../auth/authenticator.ts";
import { type RpcRule, ruleOf } from "./policies.ts";

/** The caller of the current request, for handlers: `ctx.values.get(authContextKey)`. */
export const authContextKey = createContextKey<AuthContext | undefined>(undefined, { description: "identity caller" });

const unauthenticated = (message: string, extra?: ErrorExtra) =>
  PlatformError.unauthenticated(message, IdentityRestCode.unauthenticated, extra);

/**
 * Applies each RPC's policy (policies.ts) to the `Authorization: Bearer`
 * credential, JWT or API key, and puts the resolved AuthContext into the
 * context values. As a Connect interceptor it guards REST and gRPC alike.
 * The verifier's reasons (expired, key_retired, ...) stay out of the REST
 * envelope, whose code is `unauthenticated` for any bad credential.
 */
export function authInterceptor(authenticator: Authenticator): Interceptor {
  const guard = async (
    next: Parameters<Interceptor>[0],
    req: Parameters<ReturnType<Interceptor>>[0],
    rule: RpcRule | undefined,
  ) => {
    if (!rule) throw PlatformError.permissionDenied("method not available", IdentityRestCode.insufficientRole);
    const parsed = parseAuthorization(req.header.get("authorization"));
    if (!parsed.ok) {
      throw unauthenticated(
        parsed.problem === "missing"
          ? "missing Authorization: Bearer credential"
          : "Authorization must be exactly Bearer <token>",
      );
    }
    let caller: AuthContext;
    try {
      caller = await authenticator.verifyToken(parsed.credential.token);
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.Unauthenticated) throw unauthenticated(err.message);
      throw err;
    }
    if (rule.policy === "jwt-only" || rule.policy === "owner") {
      if (caller.mode !== "jwt")
        throw PlatformError.permissionDenied(
          "this endpoint requires a JWT session, not an API key",
          IdentityRestCode.insufficientRole,
        );
    }
    // A key reaches the jwt-or-key RPCs, which only read, and the admin ones.
    const scope = rule.policy === "admin" ? "admin" : "read";
    if (caller.mode === "api_key" && !caller.scopes?.includes(scope)) {
      throw PlatformError.permissionDenied(`the API key lacks the ${scope} scope`, IdentityRestCode.insufficientScope);
    }
    if ((rule.policy === "owner" && caller.role !== "owner") || (rule.policy === "admin" && !actsAsOwner(caller))) {
      throw PlatformError.permissionDenied("owner role required", IdentityRestCode.insufficientRole);
    }
    req.contextValues.set(authContextKey, caller);
    return next(req);
  };
  // Open RPCs (the internal AuthService: thousands of verifications a
  // second) pass straight through, without an async frame of their own.
  return (next) => (req) => {
    const rule = ruleOf(req.method);
    return rule?.policy === "none" ? next(req) : guard(next, req, rule);
  };
}
