import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type AuthContext, actsAsOwner, type Role } from "../auth/auth-context.ts";
import { isUuid } from "../crypto/hash.ts";

export const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);
export const notFound = (what: string) =>
  PlatformError.notFound(`${what} not found`, IdentityRestCode.resourceNotFound);

/**
 * A path's {org_id} must be the caller's organization: a malformed id is 400,
 * any other org 404 (as for every other tenant's entity), and an owner (or
 * an admin-scoped key: actsAsOwner) is required for everything under it.
 */
export function ownerOf(caller: AuthContext, orgId: string): string {
  if (!isUuid(orgId)) throw badRequest("org_id must be a UUID");
  if (orgId.toLowerCase() !== caller.orgId.toLowerCase()) throw notFound("organization");
  if (!actsAsOwner(caller))
    throw PlatformError.permissionDenied("owner role required", IdentityRestCode.insufficientRole);
  return caller.orgId;
}

export function roleOf(value: string, fallback?: Role): Role {
  if (value === "" && fallback) return fallback;
  if (value !== "owner" && value !== "member") throw badRequest('role must be "owner" or "member"');
  return value;
}
