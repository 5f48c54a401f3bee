import assert from "node:assert/strict";
import { test } from "node:test";
import { loadSettings, SettingsError } from "./settings.ts";

const base = { IDENTITY_AUTHKEY_KEK: "ab".repeat(32), IDENTITY_EMBEDDED_MEMORY: "1" };
const H = 3_600_000;

test("key rotation defaults: every 30 days, an hour of pre-publication, retention the longest token lifetime plus a minute", () => {
  assert.deepEqual(loadSettings(base).keyRotation, {
    intervalMs: 720 * H,
    prePublishMs: H,
    retentionMs: 24 * H + 60_000,
  });
  assert.equal(loadSettings({ ...base, JWT_TTL: "48h" }).keyRotation.retentionMs, 48 * H + 60_000);
  assert.equal(loadSettings({ ...base, IDENTITY_KEY_ROTATION_INTERVAL: "off" }).keyRotation.intervalMs, undefined);
});

test("key rotation settings that would break verification are refused, naming the setting", () => {
  const refused = (env: Record<string, string>, name: string) =>
    assert.throws(
      () => loadSettings({ ...base, ...env }),
      (e: unknown) => e instanceof SettingsError && e.setting === name,
    );
  refused({ IDENTITY_KEY_ROTATION_INTERVAL: "1h", IDENTITY_KEY_PREPUBLISH: "1h" }, "IDENTITY_KEY_PREPUBLISH");
  refused({ JWT_TTL: "2h", IDENTITY_KEY_RETENTION: "1h" }, "IDENTITY_KEY_RETENTION");
  refused({ IDENTITY_KEY_ROTATION_INTERVAL: "sometimes" }, "IDENTITY_KEY_ROTATION_INTERVAL");
  refused({ IDENTITY_KEY_PREPUBLISH: "0" }, "IDENTITY_KEY_PREPUBLISH");
});
