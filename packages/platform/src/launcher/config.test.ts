import assert from "node:assert/strict";
import { test } from "node:test";
import { ConfigError } from "@platform/config";
import { loadLauncherConfig } from "./config.ts";

test("launcher defaults, --verbose and the old PLATFORM_VERBOSE switch", () => {
  const c = loadLauncherConfig({});
  assert.equal(c.host, "127.0.0.1");
  assert.deepEqual(c.ports, {
    identityRest: 8081,
    identityGrpc: 50051,
    compute: 50052,
    agents: 8082,
    agentsGrpc: 50053,
    router: 8080,
    e2b: 0,
  });
  assert.deepEqual(c.restart, {
    initialDelayMs: 500,
    maxDelayMs: 30_000,
    healthyAfterMs: 60_000,
    maxCrashes: 5,
    windowMs: 600_000,
  });
  assert.deepEqual(c.log, { level: "warn", maxFileBytes: 10 * 1024 * 1024 });
  assert.equal(loadLauncherConfig({}, ["--verbose"]).log.level, "debug");
  assert.equal(loadLauncherConfig({ PLATFORM_VERBOSE: "1" }).log.level, "debug");
  assert.equal(loadLauncherConfig({ PLATFORM_VERBOSE: "1", PLATFORM_LOG_LEVEL: "error" }).log.level, "error");
});

test("a bad launcher setting is refused naming it; an unknown argument too", () => {
  for (const [name, value] of [
    ["PLATFORM_IDENTITY_PORT", "0"],
    ["PLATFORM_ROUTER_PORT", "70000"],
    ["PLATFORM_RESTART_MAX_CRASHES", "0"],
    ["PLATFORM_LOG_MAX_BYTES", "100"],
    ["PLATFORM_LOG_LEVEL", "loud"],
  ]) {
    assert.throws(
      () => loadLauncherConfig({ [name!]: value }),
      (e: unknown) => e instanceof ConfigError && e.setting === name && e.message.startsWith(name!),
      `${name}=${value}`,
    );
  }
  assert.throws(() => loadLauncherConfig({}, ["--port"]), /unknown argument "--port"/);
});
