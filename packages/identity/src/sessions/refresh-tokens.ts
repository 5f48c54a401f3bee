import { randomUUID } from "node:crypto";
import type { RunPrepared } from "@platform/db";
import { sql, type Kysely } from "kysely";
import { randomBase62, sha256 } from "../crypto/hash.ts";
import type { AuditRow } from "../audit/audit-log.ts";
import type { IdentityDB } from "../db/schema.ts";

export const REFRESH_TOKEN_PREFIX = "rt_";

export type ConsumeResult =
  | { kind: "consumed"; familyId: string; userId: string; orgId: string }
  | { kind: "reused"; familyId: string }
  | { kind: "invalid" };

/**
 * startFamily's statements, written out and prepared (statementRunner): a
 * login's one write, so its text is neither built nor parsed and planned by
 * the server on every login. Parameters: the family (id, user, org, device
 * label), its first token (id, hash, created, expires), then with the
 * audit entry its columns (audit_events, as auditRow fills them).
 */
const START_FAMILY_CTE = `with family as (
  insert into refresh_token_families (id, user_id, org_id, device_label) values ($1, $2, $3, $4)
)`;
const TOKEN_VALUES =
  "insert into refresh_tokens (id, family_id, token_hash, created_at, expires_at) values ($5, $1, $6, $7, $8)";
const START_FAMILY = `${START_FAMILY_CTE}
${TOKEN_VALUES}`;
const START_FAMILY_AUDITED = `${START_FAMILY_CTE}, token as (
  ${TOKEN_VALUES}
)
insert into audit_events (org_id, actor_user_id, actor_api_key_id, action, target_type, target_id, request_id, client_address, details)
values ($9, $10, $11, $12, $13, $14, $15, $16, $17)`;

/**
 * Refresh-token families. Tokens are opaque (`rt_` + 256 random bits) and
 * stored as SHA-256. A token is consumed by one conditional UPDATE, so of any
 * number of concurrent refreshes exactly one sees its row change; every
 * other one finds the token consumed, which is reuse and revokes the family.
 */
export class RefreshTokens {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly ttlSeconds: number,
    /** Runs login's write (statementRunner: on PostgreSQL without kysely around it). */
    private readonly run: RunPrepared,
  ) {}

  /**
   * A new family and its first token in one statement (one round trip per
   * login, atomic without a transaction); with `audit`, that audit entry too.
   */
  async startFamily(
    userId: string,
    orgId: string,
    deviceLabel: string | undefined,
    now: Date,
    audit?: AuditRow,
  ): Promise<string> {
    const familyId = randomUUID();
    const { raw, row } = this.#newToken(familyId, now);
    const family = [
      familyId,
      userId,
      orgId,
      deviceLabel ?? null,
      row.id,
      row.token_hash,
      row.created_at,
      row.expires_at,
    ];
    await (audit
      ? this.run(START_FAMILY_AUDITED, [
          ...family,
          audit.org_id,
          audit.actor_user_id,
          audit.actor_api_key_id,
          audit.action,
          audit.target_type,
          audit.target_id,
          audit.request_id,
          audit.client_address,
          audit.details,
        ])
      : this.run(START_FAMILY, family));
    return raw;
  }

  async consume(raw: string, now: Date): Promise<ConsumeResult> {
    const hash = sha256(raw);
    const won = await this.db
      .updateTable("refresh_tokens")
      .set({ consumed_at: now })
      .where("token_hash", "=", hash)
      .where("consumed_at", "is", null)
      .where("revoked_at", "is", null)
      .where("expires_at", ">", now)
      .returning(["family_id"])
      .executeTakeFirst();
    if (won) {
      const family = await this.db
        .selectFrom("refresh_token_families")
        .select(["user_id", "org_id", "revoked_at"])
        .where("id", "=", won.family_id)
        .executeTakeFirstOrThrow();
      if (family.revoked_at) return { kind: "invalid" };
      return { kind: "consumed", familyId: won.family_id, userId: family.user_id, orgId: family.org_id };
    }
    const row = await this.db
      .selectFrom("refresh_tokens")
      .select(["family_id", "consumed_at"])
      .where("token_hash", "=", hash)
      .executeTakeFirst();
    if (!row) return { kind: "invalid" };
    // Consumed wins over revoked: the losers of a concurrent refresh find the
    // family already revoked by the first loser and must still report reuse.
    if (row.consumed_at) {
      await this.revokeFamily(row.family_id, now);
      return { kind: "reused", familyId: row.family_id };
    }
    return { kind: "invalid" };
  }

  /** Next token of a family whose previous token was just consumed. */
  async rotate(familyId: string, now: Date): Promise<string> {
    const { raw, row } = this.#newToken(familyId, now);
    await this.db.insertInto("refresh_tokens").values(row).execute();
    return raw;
  }

  /** Logout: revokes the token's family if the token is known; anything else is a no-op. */
  async revokeByToken(raw: string, now: Date): Promise<void> {
    if (!raw.startsWith(REFRESH_TOKEN_PREFIX)) return;
    const row = await this.db
      .selectFrom("refresh_tokens")
      .select("family_id")
      .where("token_hash", "=", sha256(raw))
      .executeTakeFirst();
    if (row) await this.revokeFamily(row.family_id, now);
  }

  async revokeFamily(familyId: string, now: Date): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable("refresh_token_families")
        .set({ revoked_at: now })
        .where("id", "=", familyId)
        .where("revoked_at", "is", null)
        .execute();
      await trx
        .updateTable("refresh_tokens")
        .set({ revoked_at: now })
        .where("family_id", "=", familyId)
        .where("revoked_at", "is", null)
        .execute();
    });
  }

  /** Revokes every non-revoked refresh token of the user. Returns the number of families revoked. */
  async revokeAllOfUser(userId: string, now: Date): Promise<number> {
    return this.db.transaction().execute((trx) => revokeFamiliesOf(trx, userId, undefined, now));
  }

  #newToken(familyId: string, now: Date) {
    const raw = REFRESH_TOKEN_PREFIX + randomBase62(32);
    const row = {
      id: randomUUID(),
      family_id: familyId,
      token_hash: sha256(raw),
      created_at: now,
      expires_at: new Date(now.getTime() + this.ttlSeconds * 1000),
    };
    return { raw, row };
  }
}

/**
 * Revokes the user's live families (only those for `orgId` when given) and
 * their tokens, on `db`: the caller's transaction when part of a larger
 * change (a member removed, a password changed). Returns the families revoked.
 */
export async function revokeFamiliesOf(
  db: Kysely<IdentityDB>,
  userId: string,
  orgId: string | undefined,
  now: Date,
): Promise<number> {
  let families = db
    .updateTable("refresh_token_families")
    .set({ revoked_at: now })
    .where("user_id", "=", userId)
    .where("revoked_at", "is", null);
  if (orgId) families = families.where("org_id", "=", orgId);
  const revoked = await families.returning("id").execute();
  const ofUser = orgId
    ? sql<string>`(select id from refresh_token_families where user_id = ${userId} and org_id = ${orgId})`
    : sql<string>`(select id from refresh_token_families where user_id = ${userId})`;
  await db
    .updateTable("refresh_tokens")
    .set({ revoked_at: now })
    .where("revoked_at", "is", null)
    .where("family_id", "in", ofUser)
    .execute();
  return revoked.length;
}
