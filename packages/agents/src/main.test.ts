import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { createTestDatabase, testServerUrl } from "@platform/db/testing";
import { ComputeDouble } from "./testing/compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";

// The process as the launcher runs it: env config, embedded PGlite, one port.

const main = new URL("./main.ts", import.meta.url).pathname;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const dataDir = mkdtempSync(join(tmpdir(), "agents-main-"));
let child: ChildProcess | undefined;

before(async () => {
  await identity.start();
  await compute.start();
});
after(async () => {
  child?.kill("SIGKILL");
  await identity.stop();
  await compute.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

function run(env: Record<string, string>) {
  const proc = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", main], {
    env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr!.on("data", (c) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { proc, exited, stderr: () => stderr };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test("a missing required setting exits 2 naming it", async () => {
  const r = run({ COMPUTE_GRPC_URL: "http://127.0.0.1:1" });
  assert.equal(await r.exited, 2);
  assert.match(r.stderr(), /IDENTITY_GRPC_URL is required/);
});

test("without TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE (and no INTERNAL_TLS=off) it exits 2 naming them", async () => {
  const r = run({ IDENTITY_GRPC_URL: "https://127.0.0.1:1", COMPUTE_GRPC_URL: "https://127.0.0.1:1" });
  assert.equal(await r.exited, 2);
  assert.match(r.stderr(), /TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE/);
});

test("starts, serves health and REST, stops cleanly on SIGTERM", async (t) => {
  // PostgreSQL when the test run has one (PGlite's cold start in a fresh
  // process is slow on a loaded machine); the embedded database otherwise.
  const database = testServerUrl() ? await createTestDatabase() : undefined;
  t.after(() => database?.close());
  const databaseEnv: Record<string, string> = database?.url ? { DATABASE_URL: database.url } : {};
  const port = await freePort();
  const caller = identity.caller();
  const r = run({
    AGENTS_PORT: String(port),
    AGENTS_GRPC_PORT: String(await freePort()),
    // The doubles speak plaintext; mutual TLS is tested in server/internal-port.db.test.ts.
    INTERNAL_TLS: "off",
    HOST: "127.0.0.1",
    AGENTS_DATA_DIR: dataDir,
    ...databaseEnv,
    IDENTITY_GRPC_URL: identity.url,
    COMPUTE_GRPC_URL: compute.url,
  });
  child = r.proc;
  const base = `http://127.0.0.1:${port}`;
  // Start-up is tsx compiling the service plus PGlite's cold start: seconds, more on a busy machine.
  const deadline = Date.now() + 90_000;
  while (true) {
    const ok = await fetch(`${base}/livez`).then(
      (res) => res.ok,
      () => false,
    );
    if (ok) break;
    assert.ok(Date.now() < deadline && r.proc.exitCode === null, `service did not start: ${r.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  const created = await fetch(`${base}/v1/agents`, {
    method: "POST",
    headers: { authorization: `Bearer ${caller.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "p", slug: "p", model: "dev/echo" }),
  });
  assert.equal(created.status, 201);
  r.proc.kill("SIGTERM");
  assert.equal(await r.exited, 0);
  child = undefined;
});
