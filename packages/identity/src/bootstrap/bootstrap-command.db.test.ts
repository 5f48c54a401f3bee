// The bootstrap command as a process, on its own database: a new database on
// the PostgreSQL server, or a PGlite directory. A file of its own, because
// each spawn starts tsx (and PGlite) afresh, which is slow on a loaded machine.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { createTestDatabase, seedPgliteDataDir, testServerUrl } from "@platform/db/testing";
import { identityMigrations, MIGRATIONS_TABLE } from "../db/migrations.ts";

// Generous limits: the command is a fresh process (tsx + PGlite start), slow on a loaded 2-core machine.
test("the bootstrap command creates once, then reports nothing changed", { timeout: 420_000 }, async () => {
  // The command gets its own database: a new one on the PostgreSQL server, or a PGlite directory.
  const own = testServerUrl() ? await createTestDatabase() : undefined;
  const dir = own ? undefined : mkdtempSync(join(tmpdir(), "identity-boot-"));
  try {
    // On PGlite the directory holds a migrated cluster already: the first run skips PGlite's initdb
    // (5 s of CPU) and the migrations, which are not the subject here (migrations.db.test is).
    if (dir) await seedPgliteDataDir(dir, { table: MIGRATIONS_TABLE, migrations: identityMigrations });
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
    const run = () =>
      spawnSync(process.execPath, ["--liftoff-only", "--import", "tsx", cmd], {
        env,
        encoding: "utf8",
        timeout: 180_000,
      });
    const one = run();
    assert.equal(one.status, 0, one.stderr);
    assert.match(one.stdout, /created owner cmd@example.com/);
    assert.ok(!one.stdout.includes("command-pw-1") && !one.stderr.includes("command-pw-1"));
    const two = run();
    assert.equal(two.status, 0, two.stderr);
    assert.match(two.stdout, /already exists.*nothing changed/);
    const missing = spawnSync(process.execPath, ["--liftoff-only", "--import", "tsx", cmd], {
      env: { ...env, BOOTSTRAP_OWNER_EMAIL: "" },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /BOOTSTRAP_OWNER_EMAIL/);
  } finally {
    await own?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});
