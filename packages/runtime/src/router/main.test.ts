import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Annotation } from "../controller/labels.ts";
import { isServing } from "../health/grpc-health.ts";
import { freePort } from "../orchestrator/local/free-port.ts";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { loadServiceTls } from "@platform/rpc";
import { AgentsDouble } from "../testing/agents-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const ORG = "0a1b2c3d-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";

function run(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", MAIN], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
}

function exited(child: ChildProcess): Promise<{ code: number | null; stderr: string }> {
  let stderr = "";
  child.stderr?.on("data", (c) => (stderr += c));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stderr })));
}

async function until(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

describe("router main", () => {
  let pki: TestPki;
  const tlsOf = (name: string) => loadServiceTls(pki.env(name));
  let identity: IdentityDouble;
  let agents: AgentsDouble;
  let dataDir: string;
  before(async () => {
    pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker"]);
    identity = new IdentityDouble({ tls: tlsOf("identity") });
    agents = new AgentsDouble(tlsOf("agents"));
    await identity.start();
    await agents.start();
    dataDir = await mkdtemp(join(tmpdir(), "runtime-main-"));
  });
  after(async () => {
    await agents.close();
    await identity.stop();
    await rm(dataDir, { recursive: true, force: true });
    pki.remove();
  });

  test("a missing required setting exits 2 naming it", async () => {
    const { code, stderr } = await exited(run({ AGENTS_GRPC_URL: "http://127.0.0.1:1", INTERNAL_TLS: "off" }));
    assert.equal(code, 2);
    assert.match(stderr, /IDENTITY_GRPC_URL is required/);
  });

  test("without certificates (and without INTERNAL_TLS=off) it exits 2 naming the TLS settings", async () => {
    const { code, stderr } = await exited(run({ IDENTITY_GRPC_URL: identity.url, AGENTS_GRPC_URL: agents.url }));
    assert.equal(code, 2);
    assert.match(stderr, /TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE/);
  });

  test("serves invoke with a real worker process; SIGTERM stops the worker; a restart keeps the state", async () => {
    const port = await freePort("127.0.0.1");
    const env = {
      ROUTER_PORT: String(port),
      HOST: "127.0.0.1",
      IDENTITY_GRPC_URL: identity.url,
      AGENTS_GRPC_URL: agents.url,
      ...pki.env("runtime-router"),
      RUNTIME_WORKER_TLS_CERT_FILE: pki.files("runtime-worker").certFile,
      RUNTIME_WORKER_TLS_KEY_FILE: pki.files("runtime-worker").keyFile,
      RUNTIME_DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      RUNTIME_COLD_START_WAIT_MS: "90000",
    };
    const token = identity.caller(ORG, USER).token;
    const url = `http://127.0.0.1:${port}`;
    const invoke = () =>
      fetch(`${url}/v1/sessions/${SESSION}/invoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });

    let router = run(env);
    let done = exited(router);
    try {
      assert.ok(await until(async () => (await fetch(`${url}/readyz`)).status === 200, 90_000), "router ready");
      const res = await invoke();
      assert.equal(res.status, 200);
      assert.equal(await res.text(), "data: hello\n\nevent: turn_done\ndata: {}\n\n");
      const state = JSON.parse(await readFile(join(dataDir, "orchestrator.json"), "utf8"));
      const d = state.deployments["runtime-t-0a1b2c3d"];
      assert.equal(d.replicas, 1);
      assert.equal(d.annotations[Annotation.tenantId], ORG);
      const workerUrl = `https://127.0.0.1:${d.port}`;
      const serving = () => isServing(workerUrl, undefined, 1000, undefined, tlsOf("runtime-router"));
      assert.equal(await serving(), true);

      router.kill("SIGTERM");
      assert.equal((await done).code, 0);
      assert.equal(await serving(), false, "the worker stopped with its router");

      router = run(env);
      done = exited(router);
      assert.ok(await until(async () => (await fetch(`${url}/readyz`)).status === 200, 90_000));
      // Replicas 1 was kept: the worker comes back without a request.
      assert.ok(await until(serving, 90_000), "worker restarted from the kept state");
      const again = await invoke();
      assert.equal(await again.text(), "data: hello\n\nevent: turn_done\ndata: {}\n\n");
    } finally {
      router.kill("SIGTERM");
      await done;
    }
  });
});
