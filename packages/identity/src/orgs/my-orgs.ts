import { randomUUID } from "node:crypto";
import { isUniqueViolation } from "@platform/db";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import type { AuthContext, Role } from "../auth/auth-context.ts";
import { type Actor, recordAudit } from "../audit/audit-log.ts";
import { isUuid } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";
import type { TokenPair } from "../sessions/sessions.ts";
import type { TokenPairs } from "../sessions/token-pairs.ts";
import { checkNewPassword, checkUserName } from "../users/account-rules.ts";
import type { MembershipRoles } from "../users/membership-roles.ts";
import { addMembership } from "../users/memberships.ts";
import { validEmail } from "../users/users.ts";
import { type Org, type Orgs, slugify } from "./orgs.ts";

export type MyOrg = { org: Org; role: Role; joinedAt: Date };

const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);

/**
 * A user's organizations: creating one (its owner), listing them in the
 * order a password login picks from (oldest membership first, owner first
 * on ties, as Users.findForLogin), switching the session to another, and
 * self-service sign-up when the deployment allows it.
 */
export class MyOrgs {
  constructor(
    private readonly deps: {
      db: Kysely<IdentityDB>;
      orgs: Orgs;
      roles: MembershipRoles;
      hasher: PasswordHasher;
      pairs: TokenPairs;
      signupOpen: boolean;
    },
  ) {}

  async create(caller: AuthContext, actor: Actor, input: { name: string; slug: string }): Promise<Org> {
    if (caller.mode !== "jwt")
      throw PlatformError.permissionDenied(
        "creating an organization requires a JWT session",
        IdentityRestCode.insufficientRole,
      );
    return this.deps.db.transaction().execute(async (trx) => {
      const org = await this.deps.orgs.create(
        { name: input.name, slug: input.slug === "" ? undefined : input.slug },
        trx,
      );
      await addMembership(trx, caller.userId, org.id, "owner");
      await recordAudit(
        trx,
        { ...actor, orgId: org.id },
        { action: "org.created", target: { type: "org", id: org.id }, details: { name: org.name, slug: org.slug } },
      );
      return org;
    });
  }

  async list(caller: AuthContext): Promise<MyOrg[]> {
    const rows = await this.deps.db
      .selectFrom("memberships as m")
      .innerJoin("orgs as o", "o.id", "m.org_id")
      .select(["o.id", "o.name", "o.slug", "o.created_at", "o.updated_at", "m.role", "m.created_at as joined_at"])
      .where("m.user_id", "=", caller.userId)
      .orderBy("m.created_at")
      .orderBy("m.role", "desc")
      .orderBy("o.id")
      .execute();
    return rows.map((r) => ({
      org: { id: r.id, name: r.name, slug: r.slug, createdAt: r.created_at, updatedAt: r.updated_at },
      role: r.role,
      joinedAt: r.joined_at,
    }));
  }

  /** A new session in another of the caller's orgs; one the caller is not in is 404, like any other tenant's. */
  async switchTo(caller: AuthContext, actor: Actor, orgId: string, deviceLabel: string): Promise<TokenPair> {
    if (caller.mode !== "jwt")
      throw PlatformError.permissionDenied(
        "switching organization requires a JWT session",
        IdentityRestCode.insufficientRole,
      );
    if (!isUuid(orgId)) throw badRequest("org_id must be a UUID");
    if (deviceLabel.length > 200) throw badRequest("x_device_label must be at most 200 characters");
    const role = await this.deps.roles.current(caller.userId, orgId);
    if (!role) throw PlatformError.notFound("organization not found", IdentityRestCode.resourceNotFound);
    const pair = await this.deps.pairs.start(caller.userId, orgId, deviceLabel);
    await recordAudit(
      this.deps.db,
      { ...actor, orgId },
      { action: "auth.org_switched", target: { type: "org", id: orgId }, details: { from_org: caller.orgId } },
    );
    return pair;
  }

  /** IDENTITY_SIGNUP=open only: a new user owning a new organization. */
  async signUp(
    input: { email: string; password: string; name: string; orgName: string },
    meta: Actor,
  ): Promise<TokenPair> {
    if (!this.deps.signupOpen)
      throw PlatformError.permissionDenied(
        "self-service sign-up is off on this platform",
        IdentityRestCode.signupDisabled,
      );
    const email = input.email.trim();
    if (!validEmail(email)) throw badRequest("email is not valid");
    checkNewPassword(input.password);
    const name = input.name.trim() === "" ? email.split("@")[0]! : input.name;
    checkUserName(name);
    const orgName = input.orgName.trim() === "" ? `${name}'s organization` : input.orgName;
    const passwordHash = await this.deps.hasher.hash(input.password);
    const userId = randomUUID();
    let orgId: string;
    try {
      orgId = await this.deps.db.transaction().execute(async (trx) => {
        await trx.insertInto("users").values({ id: userId, email, name, password_hash: passwordHash }).execute();
        // A unique slug without asking: the name's, or the name's with a random tail when taken.
        const base = slugify(orgName);
        const taken = await trx.selectFrom("orgs").select("id").where("slug", "=", base).executeTakeFirst();
        const org = await this.deps.orgs.create(
          { name: orgName, slug: taken ? `${base.slice(0, 54).replace(/-+$/, "")}-${randomUUID().slice(0, 8)}` : base },
          trx,
        );
        await addMembership(trx, userId, org.id, "owner");
        await recordAudit(
          trx,
          { ...meta, userId, orgId: org.id },
          { action: "user.signed_up", target: { type: "user", id: userId }, details: { email, org_id: org.id } },
        );
        return org.id;
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw PlatformError.alreadyExists("email already registered");
      throw err;
    }
    return this.deps.pairs.start(userId, orgId);
  }
}
