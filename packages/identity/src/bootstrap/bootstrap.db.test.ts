import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { createTestDatabase, testServerUrl } from "@platform/db/testing";
import { type Fixture, createFixture } from "../testing/fixture.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

const input = { email: "Boot@Example.com", password: "bootstrap-pw-1", name: "Boot", orgName: "Boot Org" };

test("creates the owner and the org once; re-running changes nothing", async () => {
  const first = await f.identity.bootstrap(input);
  assert.equal(first.created, true);
  const pair = await f.identity.sessions.login({ email: "boot@example.com", password: input.password });
  const ctx = await f.identity.jwt.verify(pair.accessToken);
  assert.equal(ctx.role, "owner");
  assert.equal(ctx.orgId, first.orgId);
  const org = await f.identity.orgs.getForCaller(ctx, ctx.orgId);
  assert.deepEqual([org.name, org.slug], ["Boot Org", "boot-org"]);

  const snapshot = async () => ({
    users: await f.identity.db.selectFrom("users").selectAll().orderBy("id").execute(),
    orgs: await f.identity.db.selectFrom("orgs").selectAll().orderBy("id").execute(),
    memberships: await f.identity.db.selectFrom("memberships").selectAll().orderBy("user_id").execute(),
  });
  const before_ = await snapshot();
  const again = await f.identity.bootstrap({ ...input, email: "BOOT@example.com", password: "another-password", orgName: "Renamed" });
  assert.deepEqual(again, { created: false, userId: first.userId });
  assert.deepEqual(await snapshot(), before_);
  await f.identity.sessions.login({ email: "boot@example.com", password: input.password });
});

test("two concurrent bootstraps create one owner", async () => {
  const x = { ...input, email: "race@example.com", orgName: "Race Org" };
  const [a, b] = await Promise.all([f.identity.bootstrap(x), f.identity.bootstrap({ ...x })]);
  assert.equal([a, b].filter((r) => r.created).length, 1);
  assert.equal(a.userId, b.userId);
  assert.equal((await f.identity.db.selectFrom("orgs").select("id").where("name", "=", "Race Org").execute()).length, 1);
});

// Generous limits: the command is a fresh process (tsx + PGlite start), slow on a loaded 2-core machine.
test("the bootstrap command creates once, then reports nothing changed", { timeout: 420_000 }, async () => {
  // The command gets its own database: a new one on the PostgreSQL server, or a PGlite directory.
  const own = testServerUrl() ? await createTestDatabase() : undefined;
  const dir = own ? undefined : mkdtempSync(join(tmpdir(), "identity-boot-"));
  try {
    const env = {
      PATH: process.env.PATH ?? "",
      IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
      ...(own?.url ? { DATABASE_URL: own.url } : { IDENTITY_DATA_DIR: dir! }),
      ARGON2_MEMORY_KIB: "1024",
      ARGON2_TIME_COST: "1",
      BOOTSTRAP_OWNER_EMAIL: "cmd@example.com",
      BOOTSTRAP_OWNER_PASSWORD: "command-pw-1",
      BOOTSTRAP_ORG_NAME: "Command Org",
    };
    const cmd = fileURLToPath(new URL("../bootstrap-command.ts", import.meta.url));
    const run = () => spawnSync(process.execPath, ["--import", "tsx", cmd], { env, encoding: "utf8", timeout: 180_000 });
    const one = run();
    assert.equal(one.status, 0, one.stderr);
    assert.match(one.stdout, /created owner cmd@example.com/);
    const two = run();
    assert.equal(two.status, 0, two.stderr);
    assert.match(two.stdout, /already exists.*nothing changed/);
    assert.ok(!one.stdout.includes("command-pw-1") && !one.stderr.includes("command-pw-1"));
    const missing = spawnSync(process.execPath, ["--import", "tsx", cmd], { env: { ...env, BOOTSTRAP_OWNER_EMAIL: "" }, encoding: "utf8", timeout: 60_000 });
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /BOOTSTRAP_OWNER_EMAIL/);
  } finally {
    await own?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});
