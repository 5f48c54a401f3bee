import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type Kysely, sql } from "kysely";
import type { AuthContext, Clock, Role } from "../auth/auth-context.ts";
import { type Actor, recordAudit } from "../audit/audit-log.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import { isUuid } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import { revokeFamiliesOf } from "../sessions/refresh-tokens.ts";
import type { MembershipRoles } from "../users/membership-roles.ts";
import { badRequest, notFound, ownerOf, roleOf } from "./org-access.ts";

export type Member = { userId: string; email: string; name: string; role: Role; createdAt: Date };

const lastOwner = () =>
  PlatformError.alreadyExists("an organization keeps at least one owner", IdentityRestCode.lastOwner);

/**
 * An organization's members, managed by its owners. A change of role or a
 * removal locks the org's membership rows first, so two owners demoting or
 * removing each other at once cannot leave the org without an owner.
 */
export class Members {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly roles: MembershipRoles,
    private readonly caches: AuthCaches,
    private readonly clock: Clock,
  ) {}

  async list(caller: AuthContext, orgId: string): Promise<Member[]> {
    const org = ownerOf(caller, orgId);
    const rows = await this.db
      .selectFrom("memberships as m")
      .innerJoin("users as u", "u.id", "m.user_id")
      .select(["u.id", "u.email", "u.name", "m.role", "m.created_at"])
      .where("m.org_id", "=", org)
      .orderBy("m.created_at")
      .orderBy("u.id")
      .execute();
    return rows.map((r) => ({ userId: r.id, email: r.email, name: r.name, role: r.role, createdAt: r.created_at }));
  }

  async setRole(caller: AuthContext, actor: Actor, orgId: string, userId: string, roleValue: string): Promise<Member> {
    const org = ownerOf(caller, orgId);
    const role = roleOf(roleValue);
    if (!isUuid(userId)) throw badRequest("user_id must be a UUID");
    const member = await this.db.transaction().execute(async (trx) => {
      const { target, owners } = await lockMembers(trx, org, userId);
      if (target.role === "owner" && role === "member" && owners === 1) throw lastOwner();
      if (target.role !== role) {
        await trx
          .updateTable("memberships")
          .set({ role })
          .where("user_id", "=", userId)
          .where("org_id", "=", org)
          .execute();
        await recordAudit(trx, actor, {
          action: "member.role_changed",
          target: { type: "user", id: userId },
          details: { from: target.role, to: role },
        });
      }
      const u = await trx
        .selectFrom("users")
        .select(["email", "name"])
        .where("id", "=", userId)
        .executeTakeFirstOrThrow();
      return { userId, email: u.email, name: u.name, role, createdAt: target.created_at };
    });
    this.roles.forget(userId, org);
    return member;
  }

  /**
   * Ends the membership: the member's refresh tokens for this org are revoked
   * and their API keys in it deleted in the same transaction; their JWTs stop
   * verifying as soon as the role cache hears of it (before this returns on
   * this replica, by notification on the others).
   */
  async remove(caller: AuthContext, actor: Actor, orgId: string, userId: string): Promise<void> {
    const org = ownerOf(caller, orgId);
    if (!isUuid(userId)) throw badRequest("user_id must be a UUID");
    const now = this.clock();
    const keyHashes = await this.db.transaction().execute(async (trx) => {
      const { target, owners } = await lockMembers(trx, org, userId);
      if (target.role === "owner" && owners === 1) throw lastOwner();
      await trx.deleteFrom("memberships").where("user_id", "=", userId).where("org_id", "=", org).execute();
      const families = await revokeFamiliesOf(trx, userId, org, now);
      const keys = await trx
        .updateTable("api_keys")
        .set({ deleted_at: now })
        .where("user_id", "=", userId)
        .where("org_id", "=", org)
        .where("deleted_at", "is", null)
        .returning("key_hash")
        .execute();
      await recordAudit(trx, actor, {
        action: "member.removed",
        target: { type: "user", id: userId },
        details: { role: target.role, sessions_revoked: families, api_keys_deleted: keys.length },
      });
      return keys.map((k) => Buffer.from(k.key_hash).toString("hex"));
    });
    this.roles.forget(userId, org);
    for (const hash of keyHashes) this.caches.changed("k", hash);
  }
}

/** Locks the org's memberships (FOR UPDATE) and returns the target's and the number of owners; 404 when the user is not a member. */
async function lockMembers(trx: Kysely<IdentityDB>, orgId: string, userId: string) {
  const { rows } = await sql<{ user_id: string; role: Role; created_at: Date }>`
    select user_id, role, created_at from memberships where org_id = ${orgId} order by user_id for update`.execute(trx);
  const target = rows.find((r) => r.user_id.toLowerCase() === userId.toLowerCase());
  if (!target) throw notFound("member");
  return { target, owners: rows.filter((r) => r.role === "owner").length };
}
