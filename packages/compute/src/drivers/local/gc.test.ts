import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { collectExpiredWorkspaces, listExpiredWorkspaces } from "./gc.ts";

function layout() {
  const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-gc-"));
  const victim = fs.mkdtempSync(join(tmpdir(), "compute-gc-victim-"));
  fs.writeFileSync(join(victim, "keep"), "must survive");
  const now = Date.parse("2026-11-21T12:00:00Z");
  const make = (id: string, deleteAfter?: string) => {
    const dir = join(dataDir, "sandboxes", id);
    fs.mkdirSync(join(dir, "workspace"), { recursive: true });
    fs.writeFileSync(join(dir, "workspace", "file"), id);
    // A link out of the workspace: deleting the workspace must not follow it.
    fs.symlinkSync(victim, join(dir, "workspace", "link"));
    if (deleteAfter)
      fs.writeFileSync(join(dir, "annotations.json"), JSON.stringify({ [DELETE_AFTER_KEY]: deleteAfter }));
  };
  make("expired", new Date(now - 1000).toISOString());
  make("exactly-now", new Date(now).toISOString());
  make("in-grace", new Date(now + 3600_000).toISOString());
  make("live");
  make("garbled", "not a time");
  return { dataDir, victim, now: new Date(now) };
}

test("GC removes only workspaces whose delete-after has passed, and never follows links", async () => {
  const { dataDir, victim, now } = layout();
  assert.deepEqual(listExpiredWorkspaces(dataDir, now).sort(), ["exactly-now", "expired"]);
  const removed = await collectExpiredWorkspaces(dataDir, now);
  assert.deepEqual(removed.sort(), ["exactly-now", "expired"]);
  assert.deepEqual(fs.readdirSync(join(dataDir, "sandboxes")).sort(), ["garbled", "in-grace", "live"]);
  assert.equal(fs.readFileSync(join(victim, "keep"), "utf8"), "must survive");
  assert.deepEqual(await collectExpiredWorkspaces(dataDir, now), []);
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.rmSync(victim, { recursive: true, force: true });
});

test("the compute-gc command: dry run lists, a real run removes, expired only", () => {
  const { dataDir, victim, now } = layout();
  const cmd = fileURLToPath(new URL("../../gc-command.ts", import.meta.url));
  const runGc = (...extra: string[]) =>
    JSON.parse(
      execFileSync(
        process.execPath,
        ["--import", "tsx", cmd, "--data-dir", dataDir, "--now", now.toISOString(), ...extra],
        {
          encoding: "utf8",
        },
      ),
    );
  const dry = runGc("--dry-run");
  assert.deepEqual(dry.removed.sort(), ["exactly-now", "expired"]);
  assert.ok(fs.existsSync(join(dataDir, "sandboxes", "expired")));
  const real = runGc();
  assert.deepEqual(real.removed.sort(), ["exactly-now", "expired"]);
  assert.equal(fs.existsSync(join(dataDir, "sandboxes", "expired")), false);
  assert.ok(fs.existsSync(join(dataDir, "sandboxes", "in-grace")));
  const later = JSON.parse(
    execFileSync(
      process.execPath,
      ["--import", "tsx", cmd, "--data-dir", dataDir, "--now", new Date(now.getTime() + 2 * 3600_000).toISOString()],
      {
        encoding: "utf8",
      },
    ),
  );
  assert.deepEqual(later.removed, ["in-grace"]);
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.rmSync(victim, { recursive: true, force: true });
});
