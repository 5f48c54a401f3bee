import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { isUniqueViolation } from "@platform/db";
import { createTestDatabase, testServerUrl } from "@platform/db/testing";
import { migrateIdentity } from "./migrations.ts";
import type { IdentityDB } from "./schema.ts";

let database: Awaited<ReturnType<typeof createTestDatabase<IdentityDB>>>;
before(async () => {
  database = await createTestDatabase<IdentityDB>();
});
after(() => database.close());

test("migrations apply once (also when two migrators race) and are then a no-op", async () => {
  const [a, b] = await Promise.all([migrateIdentity(database as never), migrateIdentity(database as never)]);
  assert.deepEqual([...a, ...b].sort(), [
    "0001_initial",
    "0002_auth_change_notify",
    "0003_idempotency_sealed",
    "0004_teams",
    "0005_signing_key_rotation",
    "0006_api_key_scopes",
    "0007_org_api_keys",
    "0008_webhooks",
  ]);
  assert.deepEqual(await migrateIdentity(database as never), []);
});

test("emails are unique case-insensitively at the database", async () => {
  await database.db
    .insertInto("users")
    .values({ id: crypto.randomUUID(), email: "A@x.io", name: "a", password_hash: "h" })
    .execute();
  const err = await database.db
    .insertInto("users")
    .values({ id: crypto.randomUUID(), email: "a@X.IO", name: "b", password_hash: "h" })
    .execute()
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(isUniqueViolation(err), String(err));
});

test("the migrate command uses MIGRATION_DB_URL (PostgreSQL only: the cluster's migrations Job)", {
  skip: !testServerUrl(),
}, () => {
  const cmd = fileURLToPath(new URL("../migrate-command.ts", import.meta.url));
  const r = spawnSync(process.execPath, ["--liftoff-only", "--import", "tsx", cmd], {
    env: {
      PATH: process.env.PATH ?? "",
      MIGRATION_DB_URL: database.url!,
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
    },
    encoding: "utf8",
    timeout: 120_000, // a tsx start alone took 31 s at load 30
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /up to date/);
});
