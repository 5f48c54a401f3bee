import type { Kysely } from "kysely";
import type { Role } from "../auth/auth-context.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { IdentityDB } from "../db/schema.ts";
import { currentRole, removeMembership, setRole } from "./memberships.ts";

const MAX_CACHED = 50_000;
const MAX_AGE_MS = 60_000;

/**
 * Current membership roles as every verification needs them (the spec: the
 * role of the current membership, never the token's), cached per (user,
 * org). Changes through here drop the entry before returning; changes by
 * other replicas or by hand arrive as `m:` notifications.
 */
export class MembershipRoles {
  readonly #roles;

  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly caches: AuthCaches,
  ) {
    this.#roles = caches.create<string, Role>(MAX_CACHED, MAX_AGE_MS);
    caches.on("m", (userAndOrg) => this.#roles.invalidate(userAndOrg));
  }

  /** The cached role, without a read: undefined when it is not cached (then `current`). */
  cached(userId: string, orgId: string): Role | undefined {
    return this.#roles.get(keyOf(userId, orgId));
  }

  current(userId: string, orgId: string): Promise<Role | undefined> {
    return this.#roles.through(keyOf(userId, orgId), () => currentRole(this.db, userId, orgId));
  }

  async setRole(userId: string, orgId: string, role: Role): Promise<void> {
    await setRole(this.db, userId, orgId, role);
    this.caches.changed("m", keyOf(userId, orgId));
  }

  /** After a transaction that changed or removed the membership has committed. */
  forget(userId: string, orgId: string): void {
    this.caches.changed("m", keyOf(userId, orgId));
  }

  async remove(userId: string, orgId: string): Promise<void> {
    await removeMembership(this.db, userId, orgId);
    this.caches.changed("m", keyOf(userId, orgId));
  }
}

// As PostgreSQL prints uuids in the notifications: a caller may write them in capitals.
const keyOf = (userId: string, orgId: string) => `${userId.toLowerCase()}:${orgId.toLowerCase()}`;
