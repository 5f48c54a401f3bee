import { CompiledQuery, type Kysely } from "kysely";
import type { Role } from "../auth/auth-context.ts";
import type { IdentityDB } from "../db/schema.ts";

// Read on every verification that misses the role cache: compiled once, not built per call.
const ROLE_SQL = "select role from memberships where user_id = $1 and org_id = $2";

/** The user's current role in the org, or undefined when not a member. */
export async function currentRole(db: Kysely<IdentityDB>, userId: string, orgId: string): Promise<Role | undefined> {
  const { rows } = await db.executeQuery<{ role: Role }>(CompiledQuery.raw(ROLE_SQL, [userId, orgId]));
  return rows[0]?.role;
}

export async function addMembership(db: Kysely<IdentityDB>, userId: string, orgId: string, role: Role): Promise<void> {
  await db
    .insertInto("memberships")
    .values({ user_id: userId, org_id: orgId, role })
    .onConflict((oc) => oc.columns(["user_id", "org_id"]).doNothing())
    .execute();
}

export async function setRole(db: Kysely<IdentityDB>, userId: string, orgId: string, role: Role): Promise<void> {
  await db.updateTable("memberships").set({ role }).where("user_id", "=", userId).where("org_id", "=", orgId).execute();
}

export async function removeMembership(db: Kysely<IdentityDB>, userId: string, orgId: string): Promise<void> {
  await db.deleteFrom("memberships").where("user_id", "=", userId).where("org_id", "=", orgId).execute();
}
