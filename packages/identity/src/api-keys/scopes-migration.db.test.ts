import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, test } from "node:test";
import { migrate } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { sql } from "kysely";
import { createIdentity } from "../identity.ts";
import { identityMigrations, MIGRATIONS_TABLE, migrateIdentity } from "../db/migrations.ts";
import type { IdentityDB } from "../db/schema.ts";
import { FAST_ARGON2 } from "../testing/fixture.ts";
import { generateApiKey } from "./api-key-format.ts";
import { sha256 } from "../crypto/hash.ts";
import { DEFAULT_SCOPES } from "./scopes.ts";

// A key stored before scopes existed could do everything a key could then: the
// migration that adds scopes must leave it able to (every scope but admin, which
// gives what no key could do), and verification must say so. The one
// that adds organization keys (0007) leaves it its user's, made by them.

const database = await createTestDatabase<IdentityDB>();
after(() => database.close());

test("a key made before 0006_api_key_scopes verifies with every scope but admin after it", async () => {
  await migrate(
    database as never,
    MIGRATIONS_TABLE,
    identityMigrations.filter((m) => m.name < "0006"),
  );
  const userId = randomUUID();
  const orgId = randomUUID();
  const key = generateApiKey("live");
  await sql`insert into users (id, email, name, password_hash) values (${userId}, ${`old-${userId}@example.com`}, 'Old', 'x')`.execute(
    database.db,
  );
  await sql`insert into orgs (id, name, slug) values (${orgId}, 'Old org', ${`old-${orgId}`})`.execute(database.db);
  await sql`insert into memberships (user_id, org_id, role) values (${userId}, ${orgId}, 'member')`.execute(
    database.db,
  );
  await sql`insert into api_keys (id, user_id, org_id, name, key_prefix, key_hash, env) values (${randomUUID()}, ${userId}, ${orgId}, 'old', ${key.keyPrefix}, ${sha256(key.raw)}, 'live')`.execute(
    database.db,
  );

  assert.deepEqual(
    await migrateIdentity(database as never),
    identityMigrations
      .map((m) => m.name)
      .filter((n) => n >= "0006")
      .sort(),
  );
  const identity = createIdentity(database as never, {
    kek: Buffer.alloc(32, 1),
    env: "dev",
    jwtTtlSeconds: 3600,
    refreshTokenTtlSeconds: 3600,
    argon2: FAST_ARGON2,
    idempotencyLockMs: 30_000,
  });
  const ctx = await identity.authenticator.verifyApiKey(key.raw);
  assert.equal(ctx.userId, userId);
  assert.deepEqual(ctx.scopes, [...DEFAULT_SCOPES]);
  assert.notEqual(ctx.orgKey, true);
  const row = await database.db
    .selectFrom("api_keys")
    .select(["user_id", "created_by"])
    .where("key_prefix", "=", key.keyPrefix)
    .executeTakeFirstOrThrow();
  assert.deepEqual(row, { user_id: userId, created_by: userId });
});
