import { randomUUID } from "node:crypto";
import { AuthReason, IdentityRestCode, PlatformError } from "@platform/errors";
import { CompiledQuery, type Kysely } from "kysely";
import { type AuthContext, type Clock, type KeyEnv, systemClock } from "../auth/auth-context.ts";
import { type Actor, actorOf, recordAudit } from "../audit/audit-log.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { CoherentCache } from "../cache/coherent-cache.ts";
import { isUuid, sha256, sha256Hex } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { MembershipRoles } from "../users/membership-roles.ts";
import { ownerOf } from "../members/org-access.ts";
import { generateApiKey, parseApiKey } from "./api-key-format.ts";
import { parseScopes } from "./scopes.ts";

export type ApiKeyItem = {
  id: string;
  name: string;
  keyPrefix: string;
  env: KeyEnv;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  scopes: string[];
  /** Owned by the organization rather than a user. */
  org: boolean;
  createdBy: string | null;
};
export type CreatedApiKey = {
  id: string;
  keyPrefix: string;
  rawKey: string;
  env: KeyEnv;
  expiresAt: Date | null;
  scopes: string[];
  org: boolean;
};

const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);
const invalidCredentials = () => PlatformError.unauthenticated("invalid API key", AuthReason.invalidCredentials);

/** The row a verification needs, cached by the key's SHA-256 in hex (as notified). userId null: an organization's key. */
type KeyRow = {
  id: string;
  userId: string | null;
  orgId: string;
  env: KeyEnv;
  keyPrefix: string;
  expiresAt: Date | null;
  scopes: string[];
};

const MAX_CACHED_KEYS = 50_000;
const MAX_AGE_MS = 60_000;
/** last_used_at is informational: written at most this often per key and process. */
export const LAST_USED_RESOLUTION_MS = 60_000;

const KEY_ROW_SQL =
  "select id, user_id, org_id, env, key_prefix, expires_at, scopes from api_keys where key_hash = $1 and deleted_at is null";

/**
 * API keys of a user in an org, or of the org itself (no user_id: created by
 * an owner, listed and revoked by owners, untouched when its creator leaves).
 * Only the SHA-256 of a key is stored; the raw key exists in the create
 * response alone. Revoking is a soft delete: the key stops authenticating at
 * once and leaves the list.
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
  async create(
    caller: AuthContext,
    input: { name: string; env?: string; expiresAt?: Date; scopes?: readonly string[]; org?: boolean },
    actor: Actor = actorOf(caller, {}),
  ): Promise<CreatedApiKey> {
    if (caller.mode !== "jwt")
      throw PlatformError.permissionDenied(
        "creating API keys requires a JWT session",
        IdentityRestCode.insufficientRole,
      );
    const org = input.org === true;
    if (org && caller.role !== "owner")
      throw PlatformError.permissionDenied(
        "only an owner creates organization keys",
        IdentityRestCode.insufficientRole,
      );
    const name = input.name.trim();
    if (name === "") throw badRequest("name is required");
    if (name.length > 200) throw badRequest("name must be at most 200 characters");
    const env = input.env === undefined || input.env === "" ? "live" : input.env;
    if (env !== "live" && env !== "test") throw badRequest('env must be "live" or "test"');
    if (input.expiresAt && input.expiresAt.getTime() <= this.clock().getTime())
      throw badRequest("expires_at must be in the future");
    const scopes = parseScopes(input.scopes);
    const key = generateApiKey(env);
    const id = randomUUID();
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto("api_keys")
        .values({
          id,
          user_id: org ? null : caller.userId,
          created_by: caller.userId,
          org_id: caller.orgId,
          name,
          key_prefix: key.keyPrefix,
          key_hash: sha256(key.raw),
          env,
          expires_at: input.expiresAt ?? null,
          scopes,
        })
        .execute();
      await recordAudit(trx, actor, {
        action: "api_key.created",
        target: { type: "api_key", id },
        details: { name, env, key_prefix: key.keyPrefix, scopes: scopes.join(" "), owner: org ? "org" : "user" },
      });
    });
    return { id, keyPrefix: key.keyPrefix, rawKey: key.raw, env, expiresAt: input.expiresAt ?? null, scopes, org };
  }

  /** The caller's non-deleted keys in the caller's org, newest first. */
  async list(caller: AuthContext): Promise<ApiKeyItem[]> {
    return this.#listWhere(caller.orgId, caller.userId);
  }

  /** The organization's own keys (owners; {org_id} must be the caller's), newest first. */
  async listOrg(caller: AuthContext, orgId: string): Promise<ApiKeyItem[]> {
    return this.#listWhere(ownerOf(caller, orgId), null);
  }

  async #listWhere(orgId: string, userId: string | null): Promise<ApiKeyItem[]> {
    const rows = await this.db
      .selectFrom("api_keys")
      .select(["id", "name", "key_prefix", "env", "expires_at", "last_used_at", "scopes", "user_id", "created_by"])
      .where((eb) => (userId === null ? eb("user_id", "is", null) : eb("user_id", "=", userId)))
      .where("org_id", "=", orgId)
      .where("deleted_at", "is", null)
      .orderBy("created_at", "desc")
      .orderBy("id")
      .execute();
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      keyPrefix: r.key_prefix,
      env: r.env,
      expiresAt: r.expires_at,
      lastUsedAt: r.last_used_at,
      scopes: r.scopes,
      org: r.user_id === null,
      createdBy: r.created_by,
    }));
  }

  /** Soft-deletes one of the caller's keys; another user's or an unknown key is 404. It stops authenticating before this returns. */
  async revoke(caller: AuthContext, id: string, actor: Actor = actorOf(caller, {})): Promise<void> {
    if (caller.mode !== "jwt")
      throw PlatformError.permissionDenied(
        "revoking API keys requires a JWT session",
        IdentityRestCode.insufficientRole,
      );
    await this.#revokeWhere(caller.orgId, caller.userId, id, actor);
  }

  /** Soft-deletes one of the organization's own keys (owners, JWT; {org_id} must be the caller's); any other key is 404. */
  async revokeOrg(caller: AuthContext, orgId: string, id: string, actor: Actor = actorOf(caller, {})): Promise<void> {
    if (caller.mode !== "jwt")
      throw PlatformError.permissionDenied(
        "revoking API keys requires a JWT session",
        IdentityRestCode.insufficientRole,
      );
    await this.#revokeWhere(ownerOf(caller, orgId), null, id, actor);
  }

  async #revokeWhere(orgId: string, userId: string | null, id: string, actor: Actor): Promise<void> {
    if (!isUuid(id)) throw badRequest("id must be a UUID");
    const row = await this.db.transaction().execute(async (trx) => {
      const revoked = await trx
        .updateTable("api_keys")
        .set({ deleted_at: this.clock() })
        .where("id", "=", id)
        .where((eb) => (userId === null ? eb("user_id", "is", null) : eb("user_id", "=", userId)))
        .where("org_id", "=", orgId)
        .where("deleted_at", "is", null)
        .returning(["key_hash", "key_prefix"])
        .executeTakeFirst();
      if (revoked) {
        await recordAudit(trx, actor, {
          action: "api_key.revoked",
          target: { type: "api_key", id },
          details: { key_prefix: revoked.key_prefix, owner: userId === null ? "org" : "user" },
        });
      }
      return revoked;
    });
    if (!row) throw PlatformError.notFound("API key not found", IdentityRestCode.resourceNotFound);
    this.caches.changed("k", Buffer.from(row.key_hash).toString("hex"));
  }

  /**
   * VerifyAPIKey: invalid_credentials (malformed, unknown, revoked, expired),
   * wrong_environment (a required env that differs from the key's),
   * no_membership (the key's user left the org). An organization's key
   * needs no membership: it verifies as itself (user_id = its own id, which
   * names no user; role member; org_key), never as the person who made it.
   */
  async verify(raw: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    // A cached key, its cached role and a last_used_at not due are answered
    // without an await: the only promise is this function's (a VerifyAPIKey
    // call made ~10 before, each with its async hooks and reactions).
    const parsed = parseApiKey(raw);
    if (!parsed) throw invalidCredentials();
    const now = this.clock();
    const hashHex = sha256Hex(raw);
    const row = this.#byHash.get(hashHex) ?? (await this.#byHash.through(hashHex, () => this.#read(hashHex)));
    if (!row || (row.expiresAt && row.expiresAt.getTime() <= now.getTime())) throw invalidCredentials();
    if (requiredEnv && requiredEnv !== row.env) {
      throw PlatformError.unauthenticated(`API key is for the ${row.env} environment`, AuthReason.wrongEnvironment);
    }
    const base = {
      orgId: row.orgId,
      mode: "api_key",
      env: row.env,
      apiKeyId: row.id,
      method: `api_key:${row.keyPrefix}`,
      scopes: row.scopes,
    } as const;
    if (row.userId === null) {
      if (this.#touchDue(row.id, now)) await this.#touch(row.id, now);
      return { ...base, userId: row.id, role: "member", orgKey: true };
    }
    const role = this.roles.cached(row.userId, row.orgId) ?? (await this.roles.current(row.userId, row.orgId));
    if (!role) throw PlatformError.unauthenticated("no membership in the key's organization", AuthReason.noMembership);
    if (this.#touchDue(row.id, now)) await this.#touch(row.id, now);
    return { ...base, userId: row.userId, role };
  }

  async #read(hashHex: string): Promise<KeyRow | undefined> {
    const hash = Buffer.from(hashHex, "hex");
    const { rows } = await this.db.executeQuery<{
      id: string;
      user_id: string | null;
      org_id: string;
      env: KeyEnv;
      key_prefix: string;
      expires_at: Date | null;
      scopes: string[];
    }>(CompiledQuery.raw(KEY_ROW_SQL, [hash]));
    const r = rows[0];
    return (
      r && {
        id: r.id,
        userId: r.user_id,
        orgId: r.org_id,
        env: r.env,
        keyPrefix: r.key_prefix,
        expiresAt: r.expires_at,
        scopes: r.scopes,
      }
    );
  }

  /**
   * last_used_at at most once a minute per key: from this process by its own
   * memory (no statement at all in between), across replicas by the WHERE.
   * So it lags the true last use by under a minute per replica.
   */
  #touchDue(id: string, now: Date): boolean {
    const written = this.#lastUsedWritten.get(id);
    return !(written !== undefined && now.getTime() - written < LAST_USED_RESOLUTION_MS && now.getTime() >= written);
  }

  /** Writes last_used_at (when #touchDue says it is due). */
  async #touch(id: string, now: Date): Promise<void> {
    this.#lastUsedWritten.delete(id);
    this.#lastUsedWritten.set(id, now.getTime());
    if (this.#lastUsedWritten.size > MAX_CACHED_KEYS)
      this.#lastUsedWritten.delete(this.#lastUsedWritten.keys().next().value!);
    await this.db
      .updateTable("api_keys")
      .set({ last_used_at: now })
      .where("id", "=", id)
      .where((eb) =>
        eb.or([
          eb("last_used_at", "is", null),
          eb("last_used_at", "<", new Date(now.getTime() - LAST_USED_RESOLUTION_MS)),
        ]),
      )
      .execute();
  }
}
