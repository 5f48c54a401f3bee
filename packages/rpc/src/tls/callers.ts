import type { Interceptor } from "@connectrpc/connect";
import { InternalReason, PlatformError } from "@platform/errors";
import { requestInfoKey } from "../context.ts";

/**
 * Which callers (certificate service names) may call what on an internal
 * listener: per service (typeName), either one list for all its methods or
 * one list per method name. A service or method not listed is refused.
 */
export type CallerPolicy = Readonly<Record<string, readonly string[] | Readonly<Record<string, readonly string[]>>>>;

// Any certificate of the CA may ask whether a server is up and what it serves.
const OPEN_SERVICES = new Set([
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
]);

/** Whether the service named in a client certificate may call `service`/`method` under `policy`. */
export function callerAllowed(policy: CallerPolicy, service: string, method: string, caller: string): boolean {
  if (OPEN_SERVICES.has(service)) return true;
  const entry = policy[service];
  if (entry === undefined) return false;
  const callers = Array.isArray(entry) ? entry : (entry as Record<string, readonly string[]>)[method];
  return callers?.includes(caller) ?? false;
}

/**
 * Refuses a call whose caller the policy does not list, before any other
 * interceptor (authentication, idempotency) or the handler runs. The caller
 * is the one the server read from the client certificate.
 */
export function callerInterceptor(policy: CallerPolicy): Interceptor {
  return (next) => (req) => {
    const caller = req.contextValues.get(requestInfoKey)?.caller;
    if (caller === undefined || !callerAllowed(policy, req.service.typeName, req.method.name, caller)) {
      throw PlatformError.permissionDenied(
        `${caller ?? "a caller without a certificate"} may not call ${req.service.typeName}/${req.method.name}`,
        InternalReason.callerNotAllowed,
      );
    }
    return next(req);
  };
}
