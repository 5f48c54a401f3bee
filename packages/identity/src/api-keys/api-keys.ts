import { randomUUID } from "node:crypto";
import { AuthReason, IdentityRestCode, PlatformError } from "@platform/errors";
import { CompiledQuery, type Kysely } from "kysely";
import { type AuthContext, type Clock, type KeyEnv, systemClock } from "../auth/auth-context.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { CoherentCache } from "../cache/coherent-cache.ts";
import { isUuid, sha256 } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { MembershipRoles } from "../users/membership-roles.ts";
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

/** The row a verification needs, cached by the key's SHA-256 in hex (as notified). */
type KeyRow = { id: string; userId: string; orgId: string; env: KeyEnv; keyPrefix: string; expiresAt: Date | null };

const MAX_CACHED_KEYS = 50_000;
const MAX_AGE_MS = 60_000;
/** last_used_at is informational: written at most this often per key and process. */
export const LAST_USED_RESOLUTION_MS = 60_000;

const KEY_ROW_SQL = "select id, user_id, org_id, env, key_prefix, expires_at from api_keys where key_hash = $1 and deleted_at is null";

/**
 * API keys of a user in an org. Only the SHA-256 of a key is stored; the raw
 * key exists in the create response alone. Revoking is a soft delete: the key
 * stops authenticating at once and leaves the list.
 */
export class ApiKeys {
  readonly #byHash: CoherentCache<string, KeyRow>;
  // Per key, when this process last wrote its last_used_at.
  readonly #lastUsedWritten = new Map<string, number>();

  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly roles: MembershipRoles,
    private readonly caches: AuthCaches,
    private readonly clock: Clock = systemClock,
  ) {
    this.#byHash = caches.create(MAX_CACHED_KEYS, MAX_AGE_MS);
    caches.on("k", (hashHex) => this.#byHash.invalidate(hashHex));
  }

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

  /** Soft-deletes one of the caller's keys; another user's or an unknown key is 404. It stops authenticating before this returns. */
  async revoke(caller: AuthContext, id: string): Promise<void> {
    if (caller.mode !== "jwt") throw PlatformError.permissionDenied("revoking API keys requires a JWT session", IdentityRestCode.insufficientRole);
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    const row = await this.db
      .updateTable("api_keys")
      .set({ deleted_at: this.clock() })
      .where("id", "=", id)
      .where("user_id", "=", caller.userId)
      .where("org_id", "=", caller.orgId)
      .where("deleted_at", "is", null)
      .returning("key_hash")
      .executeTakeFirst();
    if (!row) throw PlatformError.notFound("API key not found", IdentityRestCode.resourceNotFound);
    this.caches.changed("k", Buffer.from(row.key_hash).toString("hex"));
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
    const hash = sha256(raw);
    const row = await this.#byHash.through(hash.toString("hex"), () => this.#read(hash));
    if (!row || (row.expiresAt && row.expiresAt.getTime() <= now.getTime())) throw invalidCredentials();
    if (requiredEnv && requiredEnv !== row.env) {
      throw PlatformError.unauthenticated(`API key is for the ${row.env} environment`, AuthReason.wrongEnvironment);
    }
    const role = await this.roles.current(row.userId, row.orgId);
    if (!role) throw PlatformError.unauthenticated("no membership in the key's organization", AuthReason.noMembership);
    await this.#touch(row.id, now);
    return { userId: row.userId, orgId: row.orgId, mode: "api_key", role, env: row.env, apiKeyId: row.id, method: `api_key:${row.keyPrefix}` };
  }

  async #read(hash: Buffer): Promise<KeyRow | undefined> {
    const { rows } = await this.db.executeQuery<{ id: string; user_id: string; org_id: string; env: KeyEnv; key_prefix: string; expires_at: Date | null }>(
      CompiledQuery.raw(KEY_ROW_SQL, [hash]),
    );
    const r = rows[0];
    return r && { id: r.id, userId: r.user_id, orgId: r.org_id, env: r.env, keyPrefix: r.key_prefix, expiresAt: r.expires_at };
  }

  /**
   * last_used_at at most once a minute per key: from this process by its own
   * memory (no statement at all in between), across replicas by the WHERE.
   * So it lags the true last use by under a minute per replica.
   */
  async #touch(id: string, now: Date): Promise<void> {
    const written = this.#lastUsedWritten.get(id);
    if (written !== undefined && now.getTime() - written < LAST_USED_RESOLUTION_MS && now.getTime() >= written) return;
    this.#lastUsedWritten.delete(id);
    this.#lastUsedWritten.set(id, now.getTime());
    if (this.#lastUsedWritten.size > MAX_CACHED_KEYS) this.#lastUsedWritten.delete(this.#lastUsedWritten.keys().next().value!);
    await this.db
      .updateTable("api_keys")
      .set({ last_used_at: now })
      .where("id", "=", id)
      .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", new Date(now.getTime() - LAST_USED_RESOLUTION_MS))]))
      .execute();
  }
}
