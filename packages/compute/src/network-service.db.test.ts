// Sandbox network end to end (issue 21): ComputeService over gRPC (mutual
// TLS), the local driver with the egress proxy, real sandboxes, and an
// outside world made by the test (a network namespace behind a veth pair
// with HTTP and HTTPS servers; names answered by the proxy's resolver
// settings). No traffic leaves the machine.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Client, createClient } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { Code } from "@platform/errors";
import { ComputeService, SandboxStatus } from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, fromConnectError, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { EgressProxy } from "./egress/proxy.ts";
import { createResolver } from "./egress/resolver.ts";
import { specOf } from "./service/compute-domain.ts";
import { KyselyNetworkEventStore } from "./store/kysely-network-event-store.ts";
import { KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
import { testComputeConfig } from "./testing/config.ts";
import { createNetworkWorld, type NetworkWorld } from "./testing/network-world.ts";

const logger = pino({ level: "silent" });
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

let database: Database<unknown>;
let dataDir: string;
let cgroupPrefix: string;
let pki: TestPki;
let app: ComputeApp;
let proxy: EgressProxy;
let client: Client<typeof ComputeService>;
let world: NetworkWorld;
let driver: LocalDriver;

before(async () => {
  database = await createTestDatabase<unknown>();
  pki = await makeTestPki(["compute", "agents"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-net-"));
  fs.chmodSync(dataDir, 0o711);
  cgroupPrefix = `platform-compute-net-${process.pid}`;
  world = await createNetworkWorld(["allowed.test", "denied.test"]);
  proxy = new EgressProxy({
    resolver: createResolver({
      hosts: new Map([
        ["allowed.test", [world.worldAddress]],
        ["denied.test", [world.worldAddress]],
        ["loop.test", ["127.0.0.1"]],
      ]),
    }),
    protectedPorts: [5432],
    events: new KyselyNetworkEventStore(database),
    spliceRelay: true, // as compute runs it
    logger,
  });
  driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix,
    logger,
    dieWithService: true,
    warmSandboxes: 1,
    egress: proxy,
    // A paused sandbox is released at once: its resume is a new start, in a new network namespace.
    releasePausedAfterMs: 0,
  });
  app = await createComputeApp(testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  const { url } = await app.server.listen();
  client = createClient(
    ComputeService,
    createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env("agents")), expectServer: "compute" }),
  );
});

after(async () => {
  await app?.close();
  await proxy?.close();
  const cleaner = new LocalDriver({ dataDir, cgroupPrefix, logger, dieWithService: true, warmSandboxes: 0 });
  for (const r of database ? await new KyselySandboxStore(database).listLive() : []) {
    await cleaner.recover(specOf(r)).catch(() => {});
    await cleaner.destroy(r.id).catch(() => {});
  }
  await cleaner.close();
  await database?.close();
  await world?.close();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  pki?.remove();
});

async function sandbox(policy?: { allowAll?: boolean; allowedDomains?: string[] }): Promise<string> {
  const { sandboxId } = await client.createSandbox({
    tenantId: randomUUID(),
    sessionId: randomUUID(),
    ...(policy
      ? { networkPolicy: { allowAll: policy.allowAll ?? false, allowedDomains: policy.allowedDomains ?? [] } }
      : {}),
  });
  // The world's certificate, for clients that verify it, in the workspace.
  await client.writeFile({ sandboxId, path: "world-ca.pem", data: fs.readFileSync(world.caFile) });
  return sandboxId;
}

async function run(sandboxId: string, script: string) {
  let stdout = "";
  let stderr = "";
  let completed: { exitCode: number; usage?: { networkEgressBytes: bigint; networkIngressBytes: bigint } } | undefined;
  for await (const e of client.execCommand({ sandboxId, command: "/bin/sh", args: ["-c", script] })) {
    if (e.event.case === "stdout") stdout += dec(e.event.value.data);
    if (e.event.case === "stderr") stderr += dec(e.event.value.data);
    if (e.event.case === "completed") completed = e.event.value;
  }
  assert.ok(completed);
  return { stdout, stderr, exitCode: completed.exitCode, usage: completed.usage };
}

async function events(sandboxId: string) {
  await proxy.settled(sandboxId);
  const out = [];
  let pageToken = "";
  for (;;) {
    const page = await client.listNetworkEvents({ sandboxId, pageSize: 2, pageToken });
    out.push(...page.events);
    if (page.events.length < 2) return out;
    pageToken = page.nextPageToken;
  }
}

const CURL = "curl -sS --max-time 20";

test("a sandbox without a policy is as before: no proxy variables, no way out", async () => {
  const id = await sandbox();
  const r = await run(id, `env | grep -ci proxy; ${CURL} http://${world.worldAddress}/`);
  assert.equal(r.stdout.trim(), "0");
  assert.notEqual(r.exitCode, 0);
  assert.equal((await client.describeSandbox({ sandboxId: id })).networkPolicy, undefined);
  assert.deepEqual((await client.listNetworkEvents({ sandboxId: id })).events, []);
  await client.destroySandbox({ sandboxId: id });
});

test("through the proxy variables an allowed name answers curl and urllib; denied and loopback names are refused and logged; direct fails", async () => {
  const id = await sandbox({ allowedDomains: ["allowed.test", "loop.test"] });
  assert.deepEqual((await client.describeSandbox({ sandboxId: id })).networkPolicy?.allowedDomains, [
    "allowed.test",
    "loop.test",
  ]);
  const ok = await run(
    id,
    `${CURL} http://allowed.test/ && ${CURL} --cacert world-ca.pem https://allowed.test/ && /usr/bin/python3 -c '
import ssl, urllib.request
ctx = ssl.create_default_context(cafile="world-ca.pem")
print(urllib.request.urlopen("https://allowed.test/", context=ctx).read().decode(), end="")'`,
  );
  assert.equal(ok.stdout, "hello from the world\n".repeat(3), ok.stderr);
  assert.ok((ok.usage?.networkIngressBytes ?? 0n) > 0n, "the exec's usage counts its connections");

  const denied = await run(id, `${CURL} https://denied.test/`);
  assert.notEqual(denied.exitCode, 0);
  const loop = await run(id, `${CURL} -f http://loop.test:5432/ ; ${CURL} -f http://loop.test/`);
  assert.notEqual(loop.exitCode, 0);
  const direct = await run(id, `${CURL} --max-time 5 --noproxy '*' http://${world.worldAddress}/`);
  assert.notEqual(direct.exitCode, 0);

  const log = await events(id);
  const refused = log.filter((e) => !e.allowed).map((e) => [e.host, e.port, e.reason]);
  assert.deepEqual(refused, [
    ["denied.test", 443, "not_allowed"],
    ["loop.test", 5432, "host_service"],
    ["loop.test", 80, "private_address"],
  ]);
  const allowed = log.filter((e) => e.allowed);
  assert.equal(allowed.length, 3);
  assert.ok(allowed.every((e) => e.address === world.worldAddress && e.ingressBytes > 0n && e.duration));
  assert.deepEqual(
    log.map((e) => Number(e.sequence)),
    log.map((_, i) => i + 1),
  );
  await client.destroySandbox({ sandboxId: id });
});

test("a released sandbox resumed by an exec keeps its policy in its new network namespace", async () => {
  const id = await sandbox({ allowedDomains: ["allowed.test"] });
  assert.equal((await run(id, `${CURL} http://allowed.test/`)).stdout, "hello from the world\n");
  await client.pauseSandbox({ sandboxId: id });
  const end = Date.now() + 30_000;
  while (!driver.cgroupOf(id).isEmpty()) {
    assert.ok(Date.now() < end, "released within 30 s");
    await new Promise((r) => setTimeout(r, 20));
  }
  // The exec resumes it: a new init, whose namespace the proxy listens in again.
  const ok = await run(id, `${CURL} http://allowed.test/`);
  assert.equal(ok.stdout, "hello from the world\n", ok.stderr);
  assert.equal((await client.describeSandbox({ sandboxId: id })).status, SandboxStatus.READY);
  assert.notEqual((await run(id, `${CURL} https://denied.test/`)).exitCode, 0, "denied still refused");
  const direct = await run(id, `${CURL} --max-time 5 --noproxy '*' http://${world.worldAddress}/`);
  assert.notEqual(direct.exitCode, 0, "no way out but the proxy");
  const log = await events(id);
  assert.deepEqual(
    log.map((e) => [e.host, e.allowed]),
    [
      ["allowed.test", true],
      ["allowed.test", true],
      ["denied.test", false],
    ],
  );
  await client.destroySandbox({ sandboxId: id });
});

test("UpdateNetworkPolicy applies to the next connection; bad entries are INVALID_ARGUMENT naming them", async () => {
  const id = await sandbox({ allowedDomains: ["allowed.test"] });
  assert.equal((await run(id, `${CURL} http://allowed.test/`)).stdout, "hello from the world\n");
  await client.updateNetworkPolicy({ sandboxId: id, networkPolicy: { allowedDomains: ["denied.test"] } });
  assert.notEqual((await run(id, `${CURL} -f http://allowed.test/`)).exitCode, 0);
  assert.equal((await run(id, `${CURL} http://denied.test/`)).stdout, "hello from the world\n");
  await client.updateNetworkPolicy({ sandboxId: id });
  assert.notEqual((await run(id, `${CURL} -f http://denied.test/`)).exitCode, 0);
  await assert.rejects(
    client.updateNetworkPolicy({ sandboxId: id, networkPolicy: { allowedCidrs: [{ cidr: "10.0.0.0/99" }] } }),
    (err: unknown) => {
      const pe = fromConnectError(err);
      assert.equal(pe.code, Code.InvalidArgument);
      assert.match(pe.message, /allowed_cidrs\[0\].*10\.0\.0\.0\/99/);
      return true;
    },
  );
  await assert.rejects(
    client.createSandbox({
      tenantId: randomUUID(),
      sessionId: randomUUID(),
      networkPolicy: { allowedDomains: ["fine.example", "not a name"] },
    }),
    (err: unknown) =>
      fromConnectError(err).code === Code.InvalidArgument && /allowed_domains\[1\]/.test(fromConnectError(err).message),
  );
  // A sandbox created without a policy gets its way out when given one.
  const later = await sandbox();
  await client.updateNetworkPolicy({ sandboxId: later, networkPolicy: { allowedDomains: ["allowed.test"] } });
  assert.equal((await run(later, `${CURL} http://allowed.test/`)).stdout, "hello from the world\n");
  await client.destroySandbox({ sandboxId: later });
  await client.destroySandbox({ sandboxId: id });
});

test("network bytes are real in exec usage, Describe and Destroy (within 1 % on 100 MiB)", async () => {
  const size = 100 * 1024 * 1024;
  const id = await sandbox({ allowedDomains: ["allowed.test"] });
  const down = await run(id, `${CURL} -o /dev/null -w '%{size_download}' http://allowed.test/bytes/${size}`);
  assert.equal(down.stdout, String(size), down.stderr);
  const ingress = Number(down.usage?.networkIngressBytes ?? 0n);
  assert.ok(ingress >= size && ingress <= size * 1.01, `exec ingress ${ingress}`);
  const up = await run(id, `head -c ${size} /dev/zero | ${CURL} -T - http://allowed.test/upload`);
  assert.equal(up.stdout, `received ${size}\n`, up.stderr);
  const egress = Number(up.usage?.networkEgressBytes ?? 0n);
  assert.ok(egress >= size && egress <= size * 1.01, `exec egress ${egress}`);
  const described = (await client.describeSandbox({ sandboxId: id })).currentUsage;
  assert.ok(Number(described?.networkIngressBytes) >= ingress && Number(described?.networkIngressBytes) <= size * 1.02);
  assert.ok(Number(described?.networkEgressBytes) >= egress && Number(described?.networkEgressBytes) <= size * 1.02);
  const destroyed = (await client.destroySandbox({ sandboxId: id })).totalUsage;
  assert.equal(destroyed?.networkIngressBytes, described?.networkIngressBytes);
  assert.equal(destroyed?.networkEgressBytes, described?.networkEgressBytes);
  assert.equal((await client.describeSandbox({ sandboxId: id })).status, SandboxStatus.DESTROYED);
  assert.equal(
    (await client.describeSandbox({ sandboxId: id })).currentUsage?.networkIngressBytes,
    destroyed?.networkIngressBytes,
  );
  console.log(`exec usage: ingress ${ingress}, egress ${egress} for ${size} bytes each way`);
});
