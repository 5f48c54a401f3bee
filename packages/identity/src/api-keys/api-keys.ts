import { randomUUID } from "node:crypto";
import { AuthReason, IdentityRestCode, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import { type AuthContext, type Clock, type KeyEnv, systemClock } from "../auth/auth-context.ts";
import { isUuid, sha256 } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import { currentRole } from "../users/memberships.ts";
import { generateApiKey, parseApiKey } from "./api-key-format.ts";

export type ApiKeyItem = {
  id: string;
  name: string;
  keyPrefix: string;
  env: KeyEnv;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
};
export type CreatedApiKey = { id: string; keyPrefix: string; rawKey: string; env: KeyEnv; expiresAt: Date | null };

const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);
const invalidCredentials = () => PlatformError.unauthenticated("invalid API key", AuthReason.invalidCredentials);

/**
 * API keys of a user in an org. Only the SHA-256 of a key is stored; the raw
 * key exists in the create response alone. Revoking is a soft delete: the key
 * stops authenticating at once and leaves the list.
 */
export class ApiKeys {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Creating a key needs a JWT session: an API key cannot mint another key. */
  async create(caller: AuthContext, input: { name: string; env?: string; expiresAt?: Date }): Promise<CreatedApiKey> {
    if (caller.mode !== "jwt") throw PlatformError.permissionDenied("creating API keys requires a JWT session", IdentityRestCode.insufficientRole);
    const name = input.name.trim();
    if (name === "") throw badRequest("name is required");
    if (name.length > 200) throw badRequest("name must be at most 200 characters");
    const env = input.env === undefined || input.env === "" ? "live" : input.env;
    if (env !== "live" && env !== "test") throw badRequest('env must be "live" or "test"');
    if (input.expiresAt && input.expiresAt.getTime() <= this.clock().getTime()) throw badRequest("expires_at must be in the future");
    const key = generateApiKey(env);
    const id = randomUUID();
    await this.db
      .insertInto("api_keys")
      .values({
        id,
        user_id: caller.userId,
        org_id: caller.orgId,
        name,
        key_prefix: key.keyPrefix,
        key_hash: sha256(key.raw),
        env,
        expires_at: input.expiresAt ?? null,
      })
      .execute();
    return { id, keyPrefix: key.keyPrefix, rawKey: key.raw, env, expiresAt: input.expiresAt ?? null };
  }

  /** The caller's non-deleted keys in the caller's org, newest first. */
  async list(caller: AuthContext): Promise<ApiKeyItem[]> {
    const rows = await this.db
      .selectFrom("api_keys")
      .select(["id", "name", "key_prefix", "env", "expires_at", "last_used_at"])
      .where("user_id", "=", caller.userId)
      .where("org_id", "=", caller.orgId)
      .where("deleted_at", "is", null)
      .orderBy("created_at", "desc")
      .orderBy("id")
      .execute();
    return rows.map((r) => ({ id: r.id, name: r.name, keyPrefix: r.key_prefix, env: r.env, expiresAt: r.expires_at, lastUsedAt: r.last_used_at }));
  }

  /** Soft-deletes one of the caller's keys; another user's or an unknown key is 404. */
  async revoke(caller: AuthContext, id: string): Promise<void> {
    if (caller.mode !== "jwt") throw PlatformError.permissionDenied("revoking API keys requires a JWT session", IdentityRestCode.insufficientRole);
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    const res = await this.db
      .updateTable("api_keys")
      .set({ deleted_at: this.clock() })
      .where("id", "=", id)
      .where("user_id", "=", caller.userId)
      .where("org_id", "=", caller.orgId)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw PlatformError.notFound("API key not found", IdentityRestCode.resourceNotFound);
  }

  /**
   * VerifyAPIKey: invalid_credentials (malformed, unknown, revoked, expired),
   * wrong_environment (a required env that differs from the key's),
   * no_membership (the key's user left the org).
   */
  async verify(raw: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    const parsed = parseApiKey(raw);
    if (!parsed) throw invalidCredentials();
    const now = this.clock();
    const row = await this.db
      .selectFrom("api_keys")
      .select(["id", "user_id", "org_id", "env", "key_prefix", "expires_at"])
      .where("key_hash", "=", sha256(raw))
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    if (!row || (row.expires_at && row.expires_at.getTime() <= now.getTime())) throw invalidCredentials();
    if (requiredEnv && requiredEnv !== row.env) {
      throw PlatformError.unauthenticated(`API key is for the ${row.env} environment`, AuthReason.wrongEnvironment);
    }
    const role = await currentRole(this.db, row.user_id, row.org_id);
    if (!role) throw PlatformError.unauthenticated("no membership in the key's organization", AuthReason.noMembership);
    // At most one write a minute per key: last_used_at is informational and
    // every authenticated request would otherwise update the row.
    await this.db
      .updateTable("api_keys")
      .set({ last_used_at: now })
      .where("id", "=", row.id)
      .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", new Date(now.getTime() - 60_000))]))
      .execute();
    return {
      userId: row.user_id,
      orgId: row.org_id,
      mode: "api_key",
      role,
      env: row.env,
      apiKeyId: row.id,
      method: `api_key:${row.key_prefix}`,
    };
  }
}
