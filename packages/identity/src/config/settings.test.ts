import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseDuration } from "@platform/config";
import { LOGIN_THROTTLE_DEFAULTS, loadSettings, SettingsError } from "./settings.ts";

const KEK = "0123456789abcdef".repeat(4);
const base = { IDENTITY_AUTHKEY_KEK: KEK, DATABASE_URL: "postgres://u@localhost:5432/identity" };

function failsNaming(env: Record<string, string>, setting: string) {
  assert.throws(
    () => loadSettings(env),
    (e: unknown) => e instanceof SettingsError && e.setting === setting,
    `expected ${setting} to be named`,
  );
}

describe("settings", () => {
  test("defaults of every row of the identity Limits table", () => {
    const s = loadSettings(base);
    assert.equal(s.databaseUrl, base.DATABASE_URL);
    assert.equal(s.migrationDbUrl, undefined);
    assert.equal(s.kek.length, 32);
    assert.equal(s.serverPort, 8081);
    assert.equal(s.grpcPort, 50051);
    assert.equal(s.env, "dev");
    assert.equal(s.jwtTtlSeconds, 3600);
    assert.equal(s.requestTimeoutMs, 30_000);
    assert.equal(s.readHeaderTimeoutMs, 5_000);
    assert.equal(s.shutdownTimeoutMs, 30_000);
    assert.equal(s.bodyLimitBytes, 1_048_576);
    assert.equal(s.dbMaxConns, 20);
    assert.equal(s.dbMinConns, 2);
    assert.equal(s.dbMaxConnLifetimeMs, 30 * 60_000);
    assert.equal(s.logLevel, "info");
    assert.equal(s.otelEndpoint, undefined);
    // OWASP minimum for argon2id: m = 19 MiB, t = 2.
    assert.ok(s.argon2.memoryKiB >= 19 * 1024);
    assert.ok(s.argon2.timeCost >= 2);
    assert.equal(s.bootstrap, undefined);
  });

  test("every setting read from the environment", () => {
    const s = loadSettings({
      ...base,
      MIGRATION_DB_URL: "postgres://admin@localhost:5432/identity",
      SERVER_PORT: "9000",
      IDENTITY_GRPC_PORT: "9001",
      ENV: "prod",
      JWT_TTL: "15m",
      REQUEST_TIMEOUT: "10s",
      READ_HEADER_TIMEOUT: "2s",
      SHUTDOWN_TIMEOUT: "1m",
      BODY_LIMIT_BYTES: "2048",
      DB_MAX_CONNS: "5",
      DB_MIN_CONNS: "1",
      DB_MAX_CONN_LIFETIME: "1h",
      LOG_LEVEL: "debug",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://otel:4318",
      BOOTSTRAP_OWNER_EMAIL: "o@example.com",
      BOOTSTRAP_OWNER_PASSWORD: "long-enough",
      BOOTSTRAP_ORG_NAME: "Org",
    });
    assert.equal(s.migrationDbUrl, "postgres://admin@localhost:5432/identity");
    assert.deepEqual([s.serverPort, s.grpcPort, s.env, s.jwtTtlSeconds], [9000, 9001, "prod", 900]);
    assert.deepEqual([s.requestTimeoutMs, s.readHeaderTimeoutMs, s.shutdownTimeoutMs], [10_000, 2_000, 60_000]);
    assert.deepEqual([s.bodyLimitBytes, s.dbMaxConns, s.dbMinConns, s.dbMaxConnLifetimeMs], [2048, 5, 1, 3_600_000]);
    assert.equal(s.logLevel, "debug");
    assert.equal(s.otelEndpoint, "http://otel:4318");
    assert.equal(s.bootstrap?.email, "o@example.com");
  });

  test("missing or invalid required settings are named", () => {
    failsNaming({ DATABASE_URL: base.DATABASE_URL }, "IDENTITY_AUTHKEY_KEK");
    failsNaming({ ...base, IDENTITY_AUTHKEY_KEK: "abc" }, "IDENTITY_AUTHKEY_KEK");
    failsNaming({ ...base, IDENTITY_AUTHKEY_KEK: `${KEK}00` }, "IDENTITY_AUTHKEY_KEK");
    failsNaming({ ...base, IDENTITY_AUTHKEY_KEK: "z".repeat(64) }, "IDENTITY_AUTHKEY_KEK");
    failsNaming({ IDENTITY_AUTHKEY_KEK: KEK }, "DATABASE_URL");
    failsNaming({ ...base, DATABASE_URL: "mysql://x" }, "DATABASE_URL");
    failsNaming({ ...base, MIGRATION_DB_URL: "not a url" }, "MIGRATION_DB_URL");
    failsNaming({ ...base, SERVER_PORT: "eighty" }, "SERVER_PORT");
    failsNaming({ ...base, IDENTITY_GRPC_PORT: "70000" }, "IDENTITY_GRPC_PORT");
    failsNaming({ ...base, ENV: "production" }, "ENV");
    failsNaming({ ...base, JWT_TTL: "soon" }, "JWT_TTL");
    failsNaming({ ...base, REQUEST_TIMEOUT: "-1s" }, "REQUEST_TIMEOUT");
    failsNaming({ ...base, READ_HEADER_TIMEOUT: "x" }, "READ_HEADER_TIMEOUT");
    failsNaming({ ...base, SHUTDOWN_TIMEOUT: "1y" }, "SHUTDOWN_TIMEOUT");
    failsNaming({ ...base, BODY_LIMIT_BYTES: "1MB" }, "BODY_LIMIT_BYTES");
    failsNaming({ ...base, DB_MAX_CONNS: "0" }, "DB_MAX_CONNS");
    failsNaming({ ...base, DB_MIN_CONNS: "50" }, "DB_MIN_CONNS");
    failsNaming({ ...base, DB_MAX_CONN_LIFETIME: "forever" }, "DB_MAX_CONN_LIFETIME");
    failsNaming({ ...base, LOG_LEVEL: "verbose" }, "LOG_LEVEL");
    failsNaming({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: "::" }, "OTEL_EXPORTER_OTLP_ENDPOINT");
    failsNaming(
      { ...base, BOOTSTRAP_OWNER_EMAIL: "o@example.com", BOOTSTRAP_ORG_NAME: "x" },
      "BOOTSTRAP_OWNER_PASSWORD",
    );
    failsNaming(
      { ...base, BOOTSTRAP_OWNER_EMAIL: "o@example.com", BOOTSTRAP_OWNER_PASSWORD: "long-enough" },
      "BOOTSTRAP_ORG_NAME",
    );
  });

  test("the embedded shape: no DATABASE_URL with IDENTITY_DATA_DIR means PGlite there", () => {
    const s = loadSettings({ IDENTITY_AUTHKEY_KEK: KEK, IDENTITY_DATA_DIR: "/tmp/identity-data" });
    assert.equal(s.databaseUrl, undefined);
    assert.equal(s.dataDir, "/tmp/identity-data");
  });

  test("messages never echo the KEK", () => {
    const bad = `${KEK.slice(0, 63)}g`;
    try {
      loadSettings({ ...base, IDENTITY_AUTHKEY_KEK: bad });
      assert.fail("accepted");
    } catch (e) {
      assert.ok(!(e as Error).message.includes(bad));
    }
  });

  test("login throttle and hashing queue: single-machine defaults, every one settable, bad values named", () => {
    const d = loadSettings(base);
    assert.deepEqual(d.loginThrottle, LOGIN_THROTTLE_DEFAULTS);
    assert.equal(d.argon2.maxQueue, 32);
    const s = loadSettings({
      ...base,
      LOGIN_THROTTLE_ACCOUNT_FAILURES: "3",
      LOGIN_THROTTLE_ADDRESS_FAILURES: "40",
      LOGIN_THROTTLE_BASE_DELAY: "2s",
      LOGIN_THROTTLE_MAX_DELAY: "5m",
      LOGIN_THROTTLE_WINDOW: "1h",
      LOGIN_THROTTLE_MAX_ENTRIES: "1000",
      LOGIN_TRUSTED_PROXY_HOPS: "1",
      LOGIN_TRUSTED_PROXIES: "127.0.0.1, ::1,10.0.0.0/8",
      ARGON2_MAX_QUEUE: "8",
    });
    assert.deepEqual(s.loginThrottle, {
      accountFreeFailures: 3,
      addressFreeFailures: 40,
      baseDelayMs: 2000,
      maxDelayMs: 300_000,
      windowMs: 3_600_000,
      maxEntries: 1000,
      trustedProxyHops: 1,
      trustedProxies: ["127.0.0.1", "::1", "10.0.0.0/8"],
    });
    assert.equal(s.argon2.maxQueue, 8);
    for (const [setting, value] of [
      ["LOGIN_THROTTLE_ACCOUNT_FAILURES", "0"],
      ["LOGIN_THROTTLE_BASE_DELAY", "soon"],
      ["LOGIN_THROTTLE_MAX_ENTRIES", "-1"],
      ["LOGIN_TRUSTED_PROXY_HOPS", "yes"],
      ["LOGIN_TRUSTED_PROXIES", "router.local"],
      ["LOGIN_TRUSTED_PROXIES", "10.0.0.0/33"],
      ["ARGON2_MAX_QUEUE", "many"],
    ]) {
      failsNaming({ ...base, [setting!]: value! }, setting!);
    }
  });

  test("durations", () => {
    assert.equal(parseDuration("3600s"), 3_600_000);
    assert.equal(parseDuration("1h30m"), 5_400_000);
    assert.equal(parseDuration("250ms"), 250);
    assert.equal(parseDuration("30"), 30_000);
    assert.equal(parseDuration("1.5s"), 1500);
    assert.equal(parseDuration("1d"), undefined);
    assert.equal(parseDuration(""), undefined);
    assert.equal(parseDuration("s"), undefined);
  });
});

describe("main exits at start naming a bad setting", () => {
  const main = fileURLToPath(new URL("../main.ts", import.meta.url));
  const run = (env: Record<string, string>) =>
    spawnSync(process.execPath, ["--import", "tsx", main], {
      env: { PATH: process.env.PATH ?? "", ...env },
      encoding: "utf8",
      timeout: 120_000,
    });

  for (const [name, env] of [
    ["IDENTITY_AUTHKEY_KEK", { DATABASE_URL: base.DATABASE_URL }],
    ["IDENTITY_AUTHKEY_KEK", { ...base, IDENTITY_AUTHKEY_KEK: "short" }],
    ["DATABASE_URL", { IDENTITY_AUTHKEY_KEK: KEK }],
    ["SERVER_PORT", { ...base, SERVER_PORT: "-1" }],
    ["JWT_TTL", { ...base, JWT_TTL: "nope" }],
  ] as const) {
    test(`${name}: ${JSON.stringify(env).slice(0, 60)}`, () => {
      const r = run(env);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, new RegExp(name));
      assert.ok(!r.stderr.includes(KEK));
    });
  }
});
