import { randomUUID } from "node:crypto";
import { isUniqueViolation } from "@platform/db";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type Kysely, sql } from "kysely";
import { type Actor, recordAudit } from "../audit/audit-log.ts";
import type { AuthContext, Clock, Role } from "../auth/auth-context.ts";
import { isUuid, randomBase62, sha256 } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { LoginThrottle } from "../login-throttle/login-throttle.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";
import type { TokenPair } from "../sessions/sessions.ts";
import type { TokenPairs } from "../sessions/token-pairs.ts";
import { checkNewPassword, checkUserName, MAX_PASSWORD_CHARS } from "../users/account-rules.ts";
import { addMembership } from "../users/memberships.ts";
import { validEmail } from "../users/users.ts";
import { badRequest, notFound, ownerOf, roleOf } from "./org-access.ts";

export const INVITATION_PREFIX = "inv_";

export type Invitation = { id: string; orgId: string; email: string; role: Role; expiresAt: Date; createdAt: Date };
export type CreatedInvitation = { invitation: Invitation; token: string };

const invalid = () => PlatformError.notFound("invitation not found", IdentityRestCode.invitationInvalid);
const toInvitation = (r: {
  id: string;
  org_id: string;
  email: string;
  role: Role;
  expires_at: Date;
  created_at: Date;
}): Invitation => ({
  id: r.id,
  orgId: r.org_id,
  email: r.email,
  role: r.role,
  expiresAt: r.expires_at,
  createdAt: r.created_at,
});

/**
 * Invitations to an organization. The platform sends no mail: the token
 * (`inv_` + 256 random bits) is in the create response once and only its
 * SHA-256 is kept. It is single use and expires; a newer invitation for the
 * same email replaces the pending one.
 */
export class Invitations {
  constructor(
    private readonly deps: {
      db: Kysely<IdentityDB>;
      hasher: PasswordHasher;
      throttle: LoginThrottle;
      pairs: TokenPairs;
      ttlSeconds: number;
      clock: Clock;
    },
  ) {}

  async create(
    caller: AuthContext,
    actor: Actor,
    orgId: string,
    input: { email: string; role: string },
  ): Promise<CreatedInvitation> {
    const org = ownerOf(caller, orgId);
    const email = input.email.trim();
    if (!validEmail(email)) throw badRequest("email is not valid");
    const role = roleOf(input.role, "member");
    const now = this.deps.clock();
    const token = INVITATION_PREFIX + randomBase62(32);
    const row = {
      id: randomUUID(),
      org_id: org,
      email,
      role,
      token_hash: sha256(token),
      // An organization key names no user (its userId is its own id).
      invited_by: caller.orgKey ? null : caller.userId,
      created_at: now,
      expires_at: new Date(now.getTime() + this.deps.ttlSeconds * 1000),
    };
    await this.deps.db.transaction().execute(async (trx) => {
      const member = await trx
        .selectFrom("memberships as m")
        .innerJoin("users as u", "u.id", "m.user_id")
        .select("m.user_id")
        .where("m.org_id", "=", org)
        .where(sql<string>`lower(u.email)`, "=", email.toLowerCase())
        .executeTakeFirst();
      if (member)
        throw PlatformError.alreadyExists("this email already belongs to a member", IdentityRestCode.alreadyMember);
      await trx
        .updateTable("invitations")
        .set({ revoked_at: now })
        .where("org_id", "=", org)
        .where(sql<string>`lower(email)`, "=", email.toLowerCase())
        .where("accepted_at", "is", null)
        .where("revoked_at", "is", null)
        .execute();
      await trx.insertInto("invitations").values(row).execute();
      await recordAudit(trx, actor, {
        action: "member.invited",
        target: { type: "invitation", id: row.id },
        details: { email, role },
      });
    });
    return { invitation: toInvitation(row), token };
  }

  /** Pending invitations (not accepted, revoked or expired), newest first. */
  async list(caller: AuthContext, orgId: string): Promise<Invitation[]> {
    const org = ownerOf(caller, orgId);
    const rows = await this.deps.db
      .selectFrom("invitations")
      .select(["id", "org_id", "email", "role", "expires_at", "created_at"])
      .where("org_id", "=", org)
      .where("accepted_at", "is", null)
      .where("revoked_at", "is", null)
      .where("expires_at", ">", this.deps.clock())
      .orderBy("created_at", "desc")
      .orderBy("id")
      .execute();
    return rows.map(toInvitation);
  }

  async revoke(caller: AuthContext, actor: Actor, orgId: string, id: string): Promise<void> {
    const org = ownerOf(caller, orgId);
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable("invitations")
        .set({ revoked_at: this.deps.clock() })
        .where("id", "=", id)
        .where("org_id", "=", org)
        .where("accepted_at", "is", null)
        .where("revoked_at", "is", null)
        .returning(["email"])
        .executeTakeFirst();
      if (!row) throw notFound("invitation");
      await recordAudit(trx, actor, {
        action: "invitation.revoked",
        target: { type: "invitation", id },
        details: { email: row.email },
      });
    });
  }

  /**
   * Accepts with the token. A new user is created with the password; an
   * existing user must give their current password instead (an owner of any
   * org could otherwise take over an account by inviting its email), and
   * such attempts count against the login throttle like a login. Refusals:
   * invitation_invalid (unknown or revoked), invitation_expired,
   * invitation_used, invitation_email_mismatch.
   */
  async accept(
    input: { token: string; password: string; name: string; email: string; deviceLabel?: string },
    meta: Actor,
  ): Promise<TokenPair> {
    const { db, hasher, clock } = this.deps;
    if (input.token === "") throw badRequest("token is required");
    if (input.password === "") throw badRequest("password is required");
    if (!input.token.startsWith(INVITATION_PREFIX) || input.token.length > 200) throw invalid();
    const hash = sha256(input.token);
    const inv = await db.selectFrom("invitations").selectAll().where("token_hash", "=", hash).executeTakeFirst();
    if (!inv || inv.revoked_at) throw invalid();
    if (inv.accepted_at) throw PlatformError.alreadyExists("invitation already used", IdentityRestCode.invitationUsed);
    if (inv.expires_at.getTime() <= clock().getTime())
      throw PlatformError.failedPrecondition("invitation expired", IdentityRestCode.invitationExpired);
    if (input.email !== "" && input.email.trim().toLowerCase() !== inv.email.toLowerCase()) {
      throw PlatformError.permissionDenied(
        "this invitation is for another email",
        IdentityRestCode.invitationEmailMismatch,
      );
    }

    const existing = await db
      .selectFrom("users")
      .select(["id", "password_hash"])
      .where(sql<string>`lower(email)`, "=", inv.email.toLowerCase())
      .executeTakeFirst();
    let newUser: { id: string; passwordHash: string; name: string } | undefined;
    if (existing) {
      const attempt = this.deps.throttle.begin(inv.email, meta.clientAddress);
      const ok =
        input.password.length <= MAX_PASSWORD_CHARS &&
        (await hasher.verify(existing.password_hash, input.password).catch((err: unknown) => {
          // No verdict on the password (hashing queue full): not a failed guess.
          this.deps.throttle.withdraw(attempt);
          throw err;
        }));
      if (!ok) throw PlatformError.unauthenticated("invalid email or password", IdentityRestCode.unauthenticated);
      this.deps.throttle.succeeded(attempt);
    } else {
      checkNewPassword(input.password);
      const name = input.name.trim() === "" ? inv.email.split("@")[0]! : input.name;
      checkUserName(name);
      newUser = { id: randomUUID(), passwordHash: await hasher.hash(input.password), name };
    }

    const userId = existing?.id ?? newUser!.id;
    try {
      await db.transaction().execute(async (trx) => {
        if (newUser) {
          await trx
            .insertInto("users")
            .values({ id: newUser.id, email: inv.email, name: newUser.name, password_hash: newUser.passwordHash })
            .execute();
        }
        // The one conditional write that makes the token single use: of two
        // concurrent acceptances one finds the row already taken.
        const won = await trx
          .updateTable("invitations")
          .set({ accepted_at: clock(), accepted_by: userId })
          .where("id", "=", inv.id)
          .where("accepted_at", "is", null)
          .where("revoked_at", "is", null)
          .returning("id")
          .executeTakeFirst();
        if (!won) throw PlatformError.alreadyExists("invitation already used", IdentityRestCode.invitationUsed);
        await addMembership(trx, userId, inv.org_id, inv.role);
        await recordAudit(
          trx,
          { ...meta, userId, orgId: inv.org_id },
          {
            action: "invitation.accepted",
            target: { type: "invitation", id: inv.id },
            details: { email: inv.email, role: inv.role, new_user: !!newUser },
          },
        );
      });
    } catch (err) {
      // A sign-up or another invitation created the same email meanwhile.
      if (isUniqueViolation(err))
        throw PlatformError.alreadyExists("invitation already used", IdentityRestCode.invitationUsed);
      throw err;
    }
    return this.deps.pairs.start(userId, inv.org_id, input.deviceLabel);
  }
}
