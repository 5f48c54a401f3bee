import { randomUUID } from "node:crypto";
import { isUniqueViolation } from "@platform/db";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import type { AuthContext } from "../auth/auth-context.ts";
import { type Actor, actorOf, recordAudit } from "../audit/audit-log.ts";
import { isUuid } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";

export type Org = { id: string; name: string; slug: string; createdAt: Date; updatedAt: Date };

const SLUG_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const MAX_NAME = 200;

export function slugify(name: string): string {
  const slug = name
    .normalize("NFKD")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/g, "");
  return slug || "org";
}

const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);
const notFound = () => PlatformError.notFound("organization not found", IdentityRestCode.resourceNotFound);

function checkName(name: string): void {
  if (name.trim() === "") throw badRequest("name must not be empty");
  if (name.length > MAX_NAME) throw badRequest(`name must be at most ${MAX_NAME} characters`);
}
function checkSlug(slug: string): void {
  if (!SLUG_RE.test(slug)) throw badRequest("slug must be 1-63 lower-case letters, digits and inner hyphens");
}

const toOrg = (r: { id: string; name: string; slug: string; created_at: Date; updated_at: Date }): Org => ({
  id: r.id,
  name: r.name,
  slug: r.slug,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** Organizations. Callers only ever see their own: any other id is 404. */
export class Orgs {
  constructor(private readonly db: Kysely<IdentityDB>) {}

  async create(input: { name: string; slug?: string }, db: Kysely<IdentityDB> = this.db): Promise<Org> {
    checkName(input.name);
    const slug = input.slug ?? slugify(input.name);
    checkSlug(slug);
    try {
      const row = await db
        .insertInto("orgs")
        .values({ id: randomUUID(), name: input.name, slug })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toOrg(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw PlatformError.alreadyExists("slug already taken");
      throw err;
    }
  }

  /** The caller's org; a malformed id is 400, any other org 404 resource_not_found. */
  async getForCaller(caller: AuthContext, id: string): Promise<Org> {
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    if (id.toLowerCase() !== caller.orgId.toLowerCase()) throw notFound();
    const row = await this.db.selectFrom("orgs").selectAll().where("id", "=", id).executeTakeFirst();
    if (!row) throw notFound();
    return toOrg(row);
  }

  /** PATCH: owner only (checked by the caller's policy and again here); omitted fields stay as they are. */
  async update(
    caller: AuthContext,
    id: string,
    patch: { name?: string; slug?: string },
    actor: Actor = actorOf(caller, {}),
  ): Promise<Org> {
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    if (id.toLowerCase() !== caller.orgId.toLowerCase()) throw notFound();
    if (caller.role !== "owner")
      throw PlatformError.permissionDenied("owner role required", IdentityRestCode.insufficientRole);
    if (patch.name !== undefined) checkName(patch.name);
    if (patch.slug !== undefined) checkSlug(patch.slug);
    const set: { name?: string; slug?: string; updated_at?: Date } = {};
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.slug !== undefined) set.slug = patch.slug;
    if (Object.keys(set).length === 0) return this.getForCaller(caller, id);
    set.updated_at = new Date();
    try {
      return await this.db.transaction().execute(async (trx) => {
        const row = await trx.updateTable("orgs").set(set).where("id", "=", id).returningAll().executeTakeFirst();
        if (!row) throw notFound();
        await recordAudit(trx, actor, {
          action: "org.updated",
          target: { type: "org", id: row.id },
          details: { name: row.name, slug: row.slug },
        });
        return toOrg(row);
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw PlatformError.alreadyExists("slug already taken");
      throw err;
    }
  }
}
