import { IdentityRestCode, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import type { AuthContext, Clock } from "../auth/auth-context.ts";
import { type Actor, recordAudit } from "../audit/audit-log.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";
import { revokeFamiliesOf } from "../sessions/refresh-tokens.ts";
import type { TokenPair } from "../sessions/sessions.ts";
import type { TokenPairs } from "../sessions/token-pairs.ts";
import { checkNewPassword, checkUserName, MAX_PASSWORD_CHARS } from "./account-rules.ts";
import type { User } from "./users.ts";

const jwtOnly = () =>
  PlatformError.permissionDenied(
    "this endpoint requires a JWT session, not an API key",
    IdentityRestCode.insufficientRole,
  );

/** The signed-in user's own account: name and password. */
export class Account {
  constructor(
    private readonly deps: { db: Kysely<IdentityDB>; hasher: PasswordHasher; pairs: TokenPairs; clock: Clock },
  ) {}

  async update(caller: AuthContext, actor: Actor, patch: { name?: string }): Promise<User> {
    if (caller.mode !== "jwt") throw jwtOnly();
    if (patch.name !== undefined) checkUserName(patch.name);
    return this.deps.db.transaction().execute(async (trx) => {
      let q = trx.selectFrom("users").select(["id", "email", "name", "created_at"]).where("id", "=", caller.userId);
      if (patch.name !== undefined) {
        await trx.updateTable("users").set({ name: patch.name }).where("id", "=", caller.userId).execute();
        await recordAudit(trx, actor, {
          action: "user.updated",
          target: { type: "user", id: caller.userId },
          details: { name: patch.name },
        });
        q = q.forUpdate();
      }
      const row = await q.executeTakeFirst();
      if (!row) throw PlatformError.notFound("user not found", IdentityRestCode.resourceNotFound);
      return { id: row.id, email: row.email, name: row.name, createdAt: row.created_at };
    });
  }

  /**
   * The current password is required (a wrong one is 401, as at login). The
   * hash changes and every refresh token of the user, in every org, is
   * revoked in one transaction; the caller gets a fresh pair for this org.
   */
  async changePassword(
    caller: AuthContext,
    actor: Actor,
    input: { currentPassword: string; newPassword: string; deviceLabel?: string },
  ): Promise<TokenPair> {
    if (caller.mode !== "jwt") throw jwtOnly();
    if (input.currentPassword === "")
      throw PlatformError.invalidArgument("current_password is required", IdentityRestCode.invalidRequest);
    checkNewPassword(input.newPassword, "new_password");
    const { db, hasher } = this.deps;
    const row = await db
      .selectFrom("users")
      .select(["password_hash"])
      .where("id", "=", caller.userId)
      .executeTakeFirst();
    if (!row) throw PlatformError.notFound("user not found", IdentityRestCode.resourceNotFound);
    const ok =
      input.currentPassword.length <= MAX_PASSWORD_CHARS &&
      (await hasher.verify(row.password_hash, input.currentPassword));
    if (!ok) throw PlatformError.unauthenticated("current password is wrong", IdentityRestCode.unauthenticated);
    const hash = await hasher.hash(input.newPassword);
    await db.transaction().execute(async (trx) => {
      // Conditional on the hash just checked: a concurrent change wins once.
      const changed = await trx
        .updateTable("users")
        .set({ password_hash: hash })
        .where("id", "=", caller.userId)
        .where("password_hash", "=", row.password_hash)
        .returning("id")
        .executeTakeFirst();
      if (!changed) throw PlatformError.unauthenticated("current password is wrong", IdentityRestCode.unauthenticated);
      const families = await revokeFamiliesOf(trx, caller.userId, undefined, this.deps.clock());
      await recordAudit(trx, actor, {
        action: "user.password_changed",
        target: { type: "user", id: caller.userId },
        details: { sessions_revoked: families },
      });
    });
    return this.deps.pairs.start(caller.userId, caller.orgId, input.deviceLabel);
  }
}
