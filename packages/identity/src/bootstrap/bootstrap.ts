import { isUniqueViolation } from "@platform/db";
import type { Kysely } from "kysely";
import type { Bootstrap } from "../config/settings.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { Orgs } from "../orgs/orgs.ts";
import { addMembership } from "../users/memberships.ts";
import type { Users } from "../users/users.ts";

export type BootstrapResult = { created: boolean; userId: string; orgId?: string };

/**
 * Creates the initial owner and organization once. If a user with the email
 * already exists nothing changes (not the password, not the org), so running
 * it at every start and as a command is safe. Concurrent runs (two replicas)
 * are settled by the unique email index.
 */
export async function bootstrapOwner(deps: { db: Kysely<IdentityDB>; users: Users; orgs: Orgs }, input: Bootstrap): Promise<BootstrapResult> {
  const existing = await deps.users.findByEmail(input.email);
  if (existing) return { created: false, userId: existing.id };
  try {
    return await deps.db.transaction().execute(async (trx) => {
      const user = await deps.users.create({ email: input.email, name: input.name, password: input.password }, trx);
      const org = await deps.orgs.create({ name: input.orgName, slug: input.orgSlug }, trx);
      await addMembership(trx, user.id, org.id, "owner");
      return { created: true, userId: user.id, orgId: org.id };
    });
  } catch (err) {
    const raced = await deps.users.findByEmail(input.email);
    if (raced && (isUniqueViolation(err) || (err as { reason?: string }).reason === "already_exists")) return { created: false, userId: raced.id };
    throw err;
  }
}
