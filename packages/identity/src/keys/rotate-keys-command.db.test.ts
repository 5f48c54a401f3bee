// `identity rotate-keys` as a process on its own database (a new one on the
// PostgreSQL server, or a PGlite directory): each run is one step, and it
// never shortens pre-publication or retention.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { createTestDatabase, seedPgliteDataDir, testServerUrl } from "@platform/db/testing";
import { identityMigrations, MIGRATIONS_TABLE } from "../db/migrations.ts";

// Generous limits: each run is a fresh process (tsx + PGlite start), slow on a loaded 2-core machine.
test("rotate-keys publishes, refuses to switch early, switches, then retires", { timeout: 600_000 }, async () => {
  const own = testServerUrl() ? await createTestDatabase() : undefined;
  const dir = own ? undefined : mkdtempSync(join(tmpdir(), "identity-rotate-"));
  try {
    // On PGlite the directory holds a migrated cluster already: the first run skips PGlite's initdb
    // (5 s of CPU) and the migrations, which are not the subject here (migrations.db.test is).
    if (dir) await seedPgliteDataDir(dir, { table: MIGRATIONS_TABLE, migrations: identityMigrations });
    const base = {
      PATH: process.env.PATH ?? "",
      IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
      ...(own?.url ? { DATABASE_URL: own.url } : { IDENTITY_DATA_DIR: dir! }),
      IDENTITY_KEY_ROTATION_INTERVAL: "off",
      JWT_TTL: "1s",
      IDENTITY_KEY_RETENTION: "1s",
      IDENTITY_KEY_PREPUBLISH: "1s",
    };
    const cmd = fileURLToPath(new URL("../rotate-keys-command.ts", import.meta.url));
    const run = (env: Record<string, string> = {}) => {
      const r = spawnSync(process.execPath, ["--liftoff-only", "--import", "tsx", cmd], {
        env: { ...base, ...env },
        encoding: "utf8",
        timeout: 180_000,
      });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const published = run().match(/^published (\S+)/m)?.[1];
    assert.ok(published);
    // Pre-publication of an hour is not over: the step says when, and switches nothing.
    assert.match(run({ IDENTITY_KEY_PREPUBLISH: "1h" }), /a key is pending; it can be activated at \d{4}-/);
    await sleep(1100);
    const switched = run().match(/^activated (\S+) \((\S+) stops signing/m);
    assert.equal(switched?.[1], published);
    const old = switched?.[2];
    assert.ok(old);
    await sleep(1100);
    const next = run();
    assert.match(next, new RegExp(`^retired ${old}$`, "m"));
    assert.match(next, /^published \S+/m, "and publishes the following key");

    const bad = spawnSync(process.execPath, ["--liftoff-only", "--import", "tsx", cmd], {
      env: { ...base, IDENTITY_KEY_RETENTION: "1s", JWT_TTL: "2s" },
      encoding: "utf8",
      timeout: 180_000,
    });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /IDENTITY_KEY_RETENTION/);
  } finally {
    await own?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});
