// Issue 24 item 2 on the real compute service (local driver, mutual TLS,
// PostgreSQL and PGlite): /metrics on COMPUTE_PORT with METRICS_TOKEN and a
// certificate of the CA, sandboxes by status from the database, execs by
// exit reason with their wall times, and ExecCommand in rpc's families.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { randomUUID } from "node:crypto";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { type Client, createClient } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { ComputeService, SandboxStatus } from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { type Family, parsePrometheusText, sampleSum } from "@platform/rpc/testing/prometheus-text";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { exitReasonOf } from "./metrics.ts";
import { testComputeConfig } from "./testing/config.ts";
import { createComputeTestDatabase } from "./testing/database.ts";

const TOKEN = "compute-metrics-token-0123456789abcdef";
const logger = pino({ level: "silent" });
let database: Database<unknown>;
let dataDir: string;
let pki: TestPki;
let app: ComputeApp;
let url: string;
let client: Client<typeof ComputeService>;

before(async () => {
  database = await createComputeTestDatabase();
  pki = await makeTestPki(["compute", "agents", "operator"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-metrics-"));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix: `platform-compute-metrics-${process.pid}`,
    logger,
    dieWithService: true,
  });
  const config = { ...testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), metricsToken: TOKEN };
  app = await createComputeApp(config, logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  ({ url } = await app.server.listen());
  client = createClient(
    ComputeService,
    createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env("agents")), expectServer: "compute" }),
  );
});
after(async () => {
  await app?.close();
  await database?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  pki.remove();
});

/** GET /metrics with the operator's certificate; `token` null sends none. */
function get(token: string | null = TOKEN): Promise<{ status: number; body: string }> {
  const tls = loadServiceTls(pki.env("operator"));
  return new Promise((resolve, reject) => {
    https
      .get(
        `${url}/metrics`,
        {
          ca: tls.ca,
          cert: tls.cert,
          key: tls.key,
          headers: token ? { authorization: `Bearer ${token}` } : {},
        },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => {
            body += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      )
      .on("error", reject);
  });
}
async function scrape(): Promise<Map<string, Family>> {
  const r = await get();
  assert.equal(r.status, 200, r.body);
  return parsePrometheusText(r.body);
}

async function exec(sandboxId: string, command: string, args: string[], timeoutMs?: number) {
  for await (const _ of client.execCommand({
    sandboxId,
    command,
    args,
    timeout: timeoutMs ? durationFromMs(timeoutMs) : undefined,
  })) {
    // drained: the completed event is what the metrics read
  }
}

test("exit reasons", () => {
  assert.equal(exitReasonOf({ exitCode: 0, cancelled: false }), "success");
  assert.equal(exitReasonOf({ exitCode: 3, cancelled: false }), "error");
  assert.equal(exitReasonOf({ exitCode: 124, cancelled: false }), "timeout");
  assert.equal(exitReasonOf({ exitCode: 137, cancelled: false }), "signal");
  assert.equal(exitReasonOf({ exitCode: -1, cancelled: true }), "cancelled");
});

test("sandboxes by status and execs by exit reason, scraped over mutual TLS", async () => {
  const before = await scrape();
  assert.equal(sampleSum(before, "platform_compute_sandboxes", { status: "READY" }), 0);
  const { sandboxId } = await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() });
  for (let i = 0; ; i++) {
    if ((await client.describeSandbox({ sandboxId })).status === SandboxStatus.READY) break;
    assert.ok(i < 400, "sandbox never READY");
    await new Promise((r) => setTimeout(r, 50));
  }
  await exec(sandboxId, "/bin/sh", ["-c", "exit 0"]);
  await exec(sandboxId, "/bin/sh", ["-c", "exit 0"]);
  await exec(sandboxId, "/bin/sh", ["-c", "exit 3"]);
  await exec(sandboxId, "/bin/sh", ["-c", "sleep 5"], 300);

  const during = await scrape();
  assert.equal(sampleSum(during, "platform_compute_sandboxes", { status: "READY" }), 1);
  const delta = (name: string, labels: Record<string, string>) =>
    sampleSum(during, name, labels) - sampleSum(before, name, labels);
  assert.equal(delta("platform_compute_execs_total", { reason: "success" }), 2);
  assert.equal(delta("platform_compute_execs_total", { reason: "error" }), 1);
  assert.equal(delta("platform_compute_execs_total", { reason: "timeout" }), 1);
  assert.equal(delta("platform_compute_exec_duration_seconds_count", { reason: "success" }), 2);
  // The timed-out exec ran about its 300 ms timeout, well under the sleep's 5 s.
  const timeoutSum = delta("platform_compute_exec_duration_seconds_sum", { reason: "timeout" });
  assert.ok(timeoutSum >= 0.2 && timeoutSum < 5, String(timeoutSum));
  assert.equal(during.get("platform_compute_exec_duration_seconds")?.type, "histogram");
  assert.equal(delta("platform_rpc_server_handled_total", { server: "compute", method: "ExecCommand", code: "OK" }), 4);
  assert.equal(delta("platform_http_requests_total", { route: "/compute.v1.ComputeService/ExecCommand" }), 4);

  await client.destroySandbox({ sandboxId });
  const gone = await scrape();
  assert.equal(sampleSum(gone, "platform_compute_sandboxes", { status: "READY" }), 0);
});

test("/metrics needs the token as well as the certificate", async () => {
  for (const token of [null, "compute-metrics-token-wrong-0123456789"]) {
    const r = await get(token);
    assert.equal(r.status, 401);
    assert.doesNotMatch(r.body, /platform_/);
  }
});
