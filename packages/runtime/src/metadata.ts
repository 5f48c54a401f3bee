/**
 * The gRPC metadata that carries tenant context from the router to the
 * tenant worker and from the worker to the agents service (spec
 * "Authentication: Runtime service" and design.md "Runtime invoke").
 */
export const Metadata = {
  authorization: "authorization",
  tenantId: "x-tenant-id",
  orgId: "x-org-id",
  userId: "x-user-id",
  requestId: "x-request-id",
  traceId: "x-trace-id",
} as const;

export interface CallIdentity {
  /** The caller's credential, forwarded as-is (`Bearer ...`). */
  authorization: string;
  tenantId: string;
  orgId: string;
  userId: string;
  requestId: string;
  traceId: string;
}

export function identityHeaders(id: CallIdentity): Record<string, string> {
  return {
    [Metadata.authorization]: id.authorization,
    [Metadata.tenantId]: id.tenantId,
    [Metadata.orgId]: id.orgId,
    [Metadata.userId]: id.userId,
    [Metadata.requestId]: id.requestId,
    [Metadata.traceId]: id.traceId,
  };
}
