import type { Kysely } from "kysely";
import { sql } from "kysely";
import type { Bootstrap } from "../config/settings.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { Orgs } from "../orgs/orgs.ts";
import { addMembership } from "../users/memberships.ts";
import type { Users } from "../users/users.ts";

export type BootstrapResult = { created: boolean; userId: string; orgId?: string };

/**
 * Creates the initial owner and organization once: as soon as any owner
 * exists (made by an earlier bootstrap, whatever its email, or by sign-up)
 * or a user with the email does, nothing changes (not a password, not an
 * org), so running it at every start and as a command is safe. Replicas and
 * commands running it at once take turns on an advisory lock.
 */
export async function bootstrapOwner(
  deps: { db: Kysely<IdentityDB>; users: Users; orgs: Orgs },
  input: Bootstrap,
): Promise<BootstrapResult> {
  return deps.db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtext('identity.bootstrap'))`.execute(trx);
    const owner = await trx
      .selectFrom("memberships")
      .select("user_id")
      .where("role", "=", "owner")
      .orderBy("created_at")
      .limit(1)
      .executeTakeFirst();
    if (owner) return { created: false, userId: owner.user_id };
    const existing = await deps.users.findByEmail(input.email, trx);
    if (existing) return { created: false, userId: existing.id };
    const user = await deps.users.create({ email: input.email, name: input.name, password: input.password }, trx);
    const org = await deps.orgs.create({ name: input.orgName, slug: input.orgSlug }, trx);
    await addMembership(trx, user.id, org.id, "owner");
    return { created: true, userId: user.id, orgId: org.id };
  });
}
