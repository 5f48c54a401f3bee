import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ConfigError, loadConfig } from "./config.ts";

test("defaults", () => {
  const c = loadConfig({});
  assert.equal(c.port, 50051);
  assert.equal(c.driver, "local");
  assert.equal(c.databaseUrl, undefined);
  assert.equal(c.pvcWorkspaceSize, "5Gi");
  assert.equal(c.pvcStorageClass, "");
  assert.ok(c.dataDir.endsWith(".data/compute"));
});

test("values from the environment", () => {
  const c = loadConfig({
    COMPUTE_PORT: "6000",
    DATABASE_URL: "postgres://u@h/db",
    COMPUTE_DATA_DIR: "/srv/compute",
    SANDBOX_IMAGE: "img:1",
    PVC_STORAGE_CLASS: "ssd",
    PVC_WORKSPACE_SIZE: "10Gi",
  });
  assert.equal(c.port, 6000);
  assert.equal(c.databaseUrl, "postgres://u@h/db");
  assert.equal(c.dataDir, "/srv/compute");
  assert.equal(c.sandboxImage, "img:1");
  assert.equal(c.pvcStorageClass, "ssd");
  assert.equal(c.pvcWorkspaceSize, "10Gi");
});

test("invalid settings name the variable", () => {
  for (const [k, v] of [
    ["COMPUTE_PORT", "abc"],
    ["COMPUTE_PORT", "70000"],
    ["DATABASE_URL", "mysql://x"],
    ["PVC_WORKSPACE_SIZE", "lots"],
    ["PVC_WORKSPACE_SIZE", "5GB"],
    ["PVC_WORKSPACE_SIZE", "1Mi"],
    ["PVC_WORKSPACE_SIZE", "2Ti"],
    ["COMPUTE_DRIVER", "docker"],
  ] as const) {
    assert.throws(
      () => loadConfig({ [k]: v }),
      (e: unknown) => e instanceof ConfigError && e.message.includes(k),
      `${k}=${v}`,
    );
  }
});

test("COMPUTE_IDLE_PAUSE_SECONDS: 5 minutes by default, seconds, off or 0 disables, anything else names the variable", () => {
  assert.equal(loadConfig({}).idlePauseMs, 300_000);
  assert.equal(loadConfig({ COMPUTE_IDLE_PAUSE_SECONDS: "90" }).idlePauseMs, 90_000);
  assert.equal(loadConfig({ COMPUTE_IDLE_PAUSE_SECONDS: "off" }).idlePauseMs, 0);
  assert.equal(loadConfig({ COMPUTE_IDLE_PAUSE_SECONDS: "0" }).idlePauseMs, 0);
  for (const v of ["-1", "5m", "1.5", "on"]) {
    assert.throws(
      () => loadConfig({ COMPUTE_IDLE_PAUSE_SECONDS: v }),
      (e: unknown) => e instanceof ConfigError && e.message.includes("COMPUTE_IDLE_PAUSE_SECONDS"),
      v,
    );
  }
});

test("the Kubernetes egress proxy: address and key file go together; a bad address or a short key is refused", () => {
  const dir = mkdtempSync(join(tmpdir(), "compute-egress-key-"));
  const good = join(dir, "key");
  const short = join(dir, "short");
  writeFileSync(good, randomBytes(32));
  writeFileSync(short, randomBytes(31));
  const c = loadConfig({ COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy:3128", COMPUTE_EGRESS_PROXY_KEY_FILE: good });
  assert.equal(c.egressProxyAddress, "egress-proxy:3128");
  assert.equal(c.egressProxyKey?.length, 32);
  assert.equal(loadConfig({}).egressProxyKey, undefined);
  for (const env of [
    { COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy:3128" },
    { COMPUTE_EGRESS_PROXY_KEY_FILE: good },
    { COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy", COMPUTE_EGRESS_PROXY_KEY_FILE: good },
    { COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy:70000", COMPUTE_EGRESS_PROXY_KEY_FILE: good },
    { COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy:3128", COMPUTE_EGRESS_PROXY_KEY_FILE: short },
    { COMPUTE_EGRESS_PROXY_ADDRESS: "egress-proxy:3128", COMPUTE_EGRESS_PROXY_KEY_FILE: join(dir, "missing") },
  ])
    assert.throws(() => loadConfig(env), ConfigError, JSON.stringify(env));
  rmSync(dir, { recursive: true });
});
