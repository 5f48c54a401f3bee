import type { Kysely } from "kysely";
import type { Role } from "../auth/auth-context.ts";
import type { IdentityDB } from "../db/schema.ts";

/** The user's current role in the org, or undefined when not a member. */
export async function currentRole(db: Kysely<IdentityDB>, userId: string, orgId: string): Promise<Role | undefined> {
  const row = await db.selectFrom("memberships").select("role").where("user_id", "=", userId).where("org_id", "=", orgId).executeTakeFirst();
  return row?.role;
}

/** The org a password login lands in: the user's oldest membership (owner first on ties). */
export async function defaultMembership(db: Kysely<IdentityDB>, userId: string): Promise<{ orgId: string; role: Role } | undefined> {
  const row = await db
    .selectFrom("memberships")
    .select(["org_id", "role"])
    .where("user_id", "=", userId)
    .orderBy("created_at")
    .orderBy("role", "desc")
    .executeTakeFirst();
  return row ? { orgId: row.org_id, role: row.role } : undefined;
}

export async function addMembership(db: Kysely<IdentityDB>, userId: string, orgId: string, role: Role): Promise<void> {
  await db.insertInto("memberships").values({ user_id: userId, org_id: orgId, role }).onConflict((oc) => oc.columns(["user_id", "org_id"]).doNothing()).execute();
}

export async function removeMembership(db: Kysely<IdentityDB>, userId: string, orgId: string): Promise<void> {
  await db.deleteFrom("memberships").where("user_id", "=", userId).where("org_id", "=", orgId).execute();
}
