// The egress proxy as its own service (Kubernetes, issue 21 step 6), started
// on 127.0.0.1 against compute's database (PostgreSQL and PGlite): each
// connection names its sandbox with the credential of its proxy URL, the
// sandbox's policy is read from its record at that moment, and events and
// bytes land where ListNetworkEvents and usage read them. Clients are curl
// and Python's urllib with the variables a Kubernetes sandbox gets; the
// "internet" is two HTTP servers on loopback (reachable only because the
// policy lists 127.0.0.1/32 with their ports). No traffic leaves the machine.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import type { Database } from "@platform/db";
import { type NetworkPolicy, validateNetworkPolicy } from "@platform/network-policy";
import { runMigrations } from "../app.ts";
import { KyselyNetworkEventStore } from "../store/kysely-network-event-store.ts";
import { KyselySandboxStore } from "../store/kysely-sandbox-store.ts";
import { proxyPassword, sharedProxyEnv } from "./credentials.ts";
import { createResolver } from "./resolver.ts";
import { startEgressService } from "./service.ts";
import { createComputeTestDatabase } from "../testing/database.ts";

let database: Database<unknown> & { url?: string };
let store: KyselySandboxStore;
let events: KyselyNetworkEventStore;
let service: Awaited<ReturnType<typeof startEgressService>>;
let upA: Server;
let upB: Server;
let portA = 0;
let portB = 0;
const key = randomBytes(32);
const sandboxA = randomUUID();
const sandboxB = randomUUID();

function listen(name: string): Promise<[Server, number]> {
  const s = createServer((_req, res) => res.end(`hello from ${name}\n`));
  return new Promise((r) => s.listen(0, "127.0.0.1", () => r([s, (s.address() as { port: number }).port])));
}

async function insert(id: string, policy: NetworkPolicy | null): Promise<void> {
  const now = new Date();
  await store.insert({
    id,
    tenantId: randomUUID(),
    sessionId: randomUUID(),
    image: "i",
    storageClass: "",
    workspaceSize: "5Gi",
    mountPath: "/workspace",
    cpuMillis: 1000,
    memoryBytes: 1 << 30,
    maxRuntimeMs: 60_000,
    idleTimeoutMs: 0,
    pausedMs: 0,
    pausedAt: null,
    status: "READY",
    failureReason: null,
    driver: "kubernetes",
    createdAt: now,
    updatedAt: now,
    destroyedAt: null,
    totalUsage: null,
    networkPolicy: policy,
  });
}

const only = (port: number) =>
  validateNetworkPolicy({ allowedDomains: ["allowed.test"], allowedCidrs: [{ cidr: "127.0.0.1/32", ports: [port] }] });

function run(cmd: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      "env",
      ["-i", "PATH=/usr/bin:/bin", ...Object.entries(env).map(([k, v]) => `${k}=${v}`), ...cmd],
      { timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const envOf = (id: string) => sharedProxyEnv("127.0.0.1", service.port, id, key);
const curl = (id: string, ...args: string[]) => run(["curl", "-sS", "--max-time", "20", ...args], envOf(id));
const eventsOf = async (id: string) => {
  await service.proxy.settled(id);
  return events.list(id, 0, 1000);
};

/** A raw exchange with the proxy: what it answers to `request` before it closes. */
function raw(request: Buffer | string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = connect(service.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    s.on("data", (d) => chunks.push(d));
    s.on("error", reject);
    s.on("close", () => resolve(Buffer.concat(chunks)));
    // Not half-closed: a client waits for the answer (the server closes).
    s.write(request);
  });
}

before(async () => {
  database = await createComputeTestDatabase();
  await runMigrations(database);
  store = new KyselySandboxStore(database);
  events = new KyselyNetworkEventStore(database);
  [upA, portA] = await listen("A");
  [upB, portB] = await listen("B");
  await insert(sandboxA, only(portA));
  await insert(sandboxB, null);
  service = await startEgressService({
    host: "127.0.0.1",
    port: 0,
    key,
    sandboxes: store,
    events,
    resolver: createResolver({ hosts: new Map([["allowed.test", ["127.0.0.1"]]]) }),
    protectedPorts: [5432],
  });
});

after(async () => {
  await service?.close();
  upA?.close();
  upB?.close();
  await database?.close();
});

test("a connection identified as sandbox A gets A's policy: allowed with curl (HTTP and SOCKS5) and urllib, denied elsewhere, all recorded with bytes", async () => {
  const ok = await curl(sandboxA, `http://allowed.test:${portA}/`);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(ok.stdout, "hello from A\n");
  const socks = await curl(sandboxA, "--proxy", envOf(sandboxA).ALL_PROXY as string, `http://allowed.test:${portA}/`);
  assert.equal(socks.stdout, "hello from A\n", socks.stderr);
  const py = await run(
    [
      "python3",
      "-c",
      `import urllib.request;print(urllib.request.urlopen("http://allowed.test:${portA}/").read().decode(),end="")`,
    ],
    envOf(sandboxA),
  );
  assert.equal(py.stdout, "hello from A\n", py.stderr);
  const denied = await curl(sandboxA, "-o", "/dev/null", "-w", "%{http_code}", `http://allowed.test:${portB}/`);
  assert.equal(denied.stdout, "403");
  const list = await eventsOf(sandboxA);
  assert.deepEqual(
    list.map((e) => [e.protocol, e.port, e.allowed, e.reason]),
    [
      ["http", portA, true, ""],
      ["socks5", portA, true, ""],
      ["http", portA, true, ""],
      ["http", portB, false, "private_address"],
    ],
  );
  assert.ok(list[0] && list[0].ingressBytes > 13 && list[0].egressBytes > 0, JSON.stringify(list[0]));
  const totals = await events.totals(sandboxA);
  assert.ok(totals.ingressBytes > 3 * 13 && totals.egressBytes > 0);
});

test("sandbox B's own credential gets B's policy (none: everything denied, recorded under B, not A)", async () => {
  const before = (await eventsOf(sandboxA)).length;
  const r = await curl(sandboxB, "-o", "/dev/null", "-w", "%{http_code}", `http://allowed.test:${portA}/`);
  assert.equal(r.stdout, "403");
  assert.deepEqual(
    (await eventsOf(sandboxB)).map((e) => [e.allowed, e.reason]),
    [[false, "not_allowed"]],
  );
  assert.equal((await eventsOf(sandboxA)).length, before);
});

test("no credential, another sandbox's password, an unknown or destroyed sandbox: 407 / SOCKS5 refusal, nothing relayed", async () => {
  const target = `http://allowed.test:${portA}/`;
  const get = (auth?: string) =>
    raw(
      `GET ${target} HTTP/1.1\r\nHost: allowed.test\r\n${auth ? `Proxy-Authorization: Basic ${Buffer.from(auth).toString("base64")}\r\n` : ""}\r\n`,
    ).then((b) => b.toString("latin1"));
  assert.match(await get(), /^HTTP\/1\.1 407 /);
  assert.match(await get(`${sandboxA}:${proxyPassword(key, sandboxB)}`), /^HTTP\/1\.1 407 /);
  assert.match(await get(`${sandboxA}:${proxyPassword(randomBytes(32), sandboxA)}`), /^HTTP\/1\.1 407 /);
  const unknown = randomUUID();
  assert.match(await get(`${unknown}:${proxyPassword(key, unknown)}`), /^HTTP\/1\.1 407 /);
  // SOCKS5 without username/password: no acceptable method.
  assert.deepEqual([...(await raw(Buffer.from([5, 1, 0])))], [5, 0xff]);
  // SOCKS5 with A's name and B's password: the sub-negotiation fails.
  const user = Buffer.from(sandboxA);
  const pass = Buffer.from(proxyPassword(key, sandboxB));
  const sub = Buffer.concat([Buffer.from([5, 1, 2, 1, user.length]), user, Buffer.from([pass.length]), pass]);
  assert.deepEqual([...(await raw(sub))], [5, 2, 1, 1]);
  // A destroyed sandbox's credential stops working.
  await store.transition(sandboxB, "DESTROYED", { destroyedAt: new Date() } as never);
  assert.match(await get(`${sandboxB}:${proxyPassword(key, sandboxB)}`), /^HTTP\/1\.1 407 /);
  // A's events did not grow with any of these.
  assert.equal((await eventsOf(sandboxA)).length, 4);
});

test("UpdateNetworkPolicy's stored policy applies to A's next connection", async () => {
  await store.setNetworkPolicy(sandboxA, only(portB));
  const b = await curl(sandboxA, `http://allowed.test:${portB}/`);
  assert.equal(b.stdout, "hello from B\n", b.stderr);
  const a = await curl(sandboxA, "-o", "/dev/null", "-w", "%{http_code}", `http://allowed.test:${portA}/`);
  assert.equal(a.stdout, "403");
});

test("the database's addresses (deniedAddresses) are refused whatever the policy lists", async () => {
  const guarded = await startEgressService({
    host: "127.0.0.1",
    port: 0,
    key,
    sandboxes: store,
    events,
    resolver: createResolver({ hosts: new Map([["allowed.test", ["127.0.0.1"]]]) }),
    protectedPorts: [5432],
    deniedAddresses: ["127.0.0.1"],
  });
  try {
    const env = sharedProxyEnv("127.0.0.1", guarded.port, sandboxA, key);
    const r = await run(
      ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", `http://allowed.test:${portB}/`],
      env,
    );
    assert.equal(r.stdout, "403");
    await guarded.proxy.settled(sandboxA);
    const last = (await events.list(sandboxA, 0, 1000)).at(-1);
    assert.deepEqual([last?.allowed, last?.reason, last?.address], [false, "host_service", "127.0.0.1"]);
  } finally {
    await guarded.close();
  }
});

test("egress/main.ts as a process (PostgreSQL only: PGlite is in this process): a sandbox's policy applies, the database's address is refused", async (t) => {
  if (!database.url) return t.skip("PGlite: the process cannot share the test's database");
  const dir = mkdtempSync(join(tmpdir(), "egress-main-"));
  writeFileSync(join(dir, "key"), key);
  const up = createServer((_req, res) => res.end("hello from C\n"));
  await new Promise<void>((r) => up.listen(0, "127.0.0.2", () => r()));
  const upPort = (up.address() as { port: number }).port;
  const free = createNetServer();
  await new Promise<void>((r) => free.listen(0, "127.0.0.1", () => r()));
  const port = (free.address() as { port: number }).port;
  await new Promise<void>((r) => free.close(() => r()));
  const sandboxC = randomUUID();
  await insert(
    sandboxC,
    validateNetworkPolicy({
      allowedDomains: ["up.test", "db.test"],
      allowedCidrs: [
        { cidr: "127.0.0.2/32", ports: [upPort] },
        { cidr: "127.0.0.1/32", ports: [portA] },
      ],
    }),
  );
  const child = spawn(
    process.execPath,
    ["--liftoff-only", "--import", "tsx", fileURLToPath(new URL("./main.ts", import.meta.url))],
    {
      env: {
        PATH: process.env.PATH ?? "",
        DATABASE_URL: database.url,
        EGRESS_PROXY_KEY_FILE: join(dir, "key"),
        EGRESS_PROXY_PORT: String(port),
        COMPUTE_EGRESS_HOSTS: "up.test=127.0.0.2,db.test=127.0.0.1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  try {
    let out = "";
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (d) => {
        out += d;
        if (out.includes("egress proxy listening")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`egress proxy exited ${code}: ${out}`)));
    });
    const env = sharedProxyEnv("127.0.0.1", port, sandboxC, key);
    const ok = await run(["curl", "-sS", "--max-time", "20", "http://up.test:" + upPort + "/"], env);
    assert.equal(ok.stdout, "hello from C\n", ok.stderr);
    // 127.0.0.1 is the database's address here (DATABASE_URL): refused although the policy lists it.
    const db = await run(
      ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", `http://db.test:${portA}/`],
      env,
    );
    assert.equal(db.stdout, "403");
    const forged = await run(
      ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", `http://up.test:${upPort}/`],
      sharedProxyEnv("127.0.0.1", port, sandboxC, randomBytes(32)),
    );
    assert.equal(forged.stdout, "407");
    // Events land in compute's database once the connections end.
    const until = Date.now() + 10_000;
    let list = await events.list(sandboxC, 0, 100);
    while (list.length < 2 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 50));
      list = await events.list(sandboxC, 0, 100);
    }
    assert.deepEqual(
      list.map((e) => [e.host, e.allowed, e.reason]),
      [
        ["up.test", true, ""],
        ["db.test", false, "host_service"],
      ],
    );
  } finally {
    child.kill("SIGTERM");
    up.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
