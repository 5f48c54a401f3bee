// test-timeout: 600000
// End to end: router → tenant worker → agents (dev model, with a tool call)
// → compute → identity, every service its real main as a process, as the
// embedded shape runs them, every internal hop over mutual TLS with its own
// certificate (a throw-away CA, as the launcher makes). Checks the SSE stream
// a client sees, and that the live tenant worker admits the router only.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as https from "node:https";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { createTestDatabase } from "@platform/db/testing";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { isServing } from "../health/grpc-health.ts";
import { freePort } from "../orchestrator/local/free-port.ts";

const root = new URL("../../../../", import.meta.url).pathname;
const OWNER = { email: "owner@example.com", password: "correct-horse-battery" };

interface Proc {
  name: string;
  child: ChildProcess;
  log: string[];
}

function start(name: string, entry: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", join(root, entry)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log: string[] = [];
  const keep = (c: Buffer) => {
    log.push(c.toString());
    if (log.length > 200) log.shift();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return { name, child, log };
}

/** Start-up budget for all four services together: PGlite and tsx start slowly on a loaded 2-core box. */
const startDeadline = () => Date.now() + 140_000;

/** GET over https with a client certificate (an internal port answers nothing without one). */
function getTls(url: string, tls: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca: tls.ca, cert: tls.cert, key: tls.key, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
  });
}

async function waitOk(
  url: string,
  procs: Proc[],
  end: number,
  tls?: { ca: Buffer; cert: Buffer; key: Buffer },
): Promise<void> {
  while (Date.now() < end) {
    for (const p of procs) {
      if (p.child.exitCode !== null)
        throw new Error(`${p.name} exited ${p.child.exitCode}: ${p.log.join("").slice(-2000)}`);
    }
    try {
      if (tls ? (await getTls(url, tls)) === 200 : (await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} not ready in time`);
}

async function json<T>(res: Response): Promise<T> {
  const text = await res.text();
  assert.ok(res.ok, `${res.status} ${text}`);
  return JSON.parse(text) as T;
}

describe("runtime end to end (real identity, compute, agents, router and worker processes)", {
  timeout: 178_000,
}, () => {
  const procs: Proc[] = [];
  const databases: Array<{ close(): Promise<void> }> = [];
  let dataDir: string;
  let pki: TestPki;
  let identityUrl: string;
  let agentsUrl: string;
  let routerUrl: string;
  let token: string;
  let sessionId: string;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "runtime-e2e-"));
    // mkdtemp makes it 0700; the sandbox's mapped user must traverse it.
    await chmod(dataDir, 0o755);
    const host = "127.0.0.1";
    // Each service's database: a fresh one on the PostgreSQL server when the
    // test run has one (TEST_DATABASE_URL), else embedded PGlite in a data
    // directory, as the one-command shape runs. PGlite's start-up is the slow
    // part of this file on a loaded machine.
    const db = async (name: string): Promise<Record<string, string>> => {
      const made = await createTestDatabase();
      if (made.url) {
        databases.push(made);
        return { DATABASE_URL: made.url };
      }
      await made.close();
      return name === "identity" ? { IDENTITY_DATA_DIR: join(dataDir, "identity") } : {};
    };
    const [idDb, computeDb, agentsDb] = [await db("identity"), await db("compute"), await db("agents")];
    pki = await makeTestPki();
    const worker = pki.files("runtime-worker");
    // Ports last, just before the processes bind them (other test files grab ephemeral ports too).
    const ports: number[] = [];
    while (ports.length < 6) {
      const p = await freePort(host);
      if (!ports.includes(p)) ports.push(p);
    }
    const [idRest, idGrpc, compute, agents, agentsGrpc, router] = ports;
    const url = (p: number) => `http://${host}:${p}`;
    const internal = (p: number) => `https://${host}:${p}`;
    identityUrl = url(idRest!);
    agentsUrl = url(agents!);
    routerUrl = url(router!);
    procs.push(
      start("identity", "packages/identity/src/main.ts", {
        HOST: host,
        SERVER_PORT: String(idRest),
        IDENTITY_GRPC_PORT: String(idGrpc),
        IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
        ...pki.env("identity"),
        ...idDb,
        BOOTSTRAP_OWNER_EMAIL: OWNER.email,
        BOOTSTRAP_OWNER_PASSWORD: OWNER.password,
        BOOTSTRAP_ORG_NAME: "E2E Org",
      }),
      start("compute", "packages/compute/src/main.ts", {
        LOG_LEVEL: "info",
        HOST: host,
        COMPUTE_PORT: String(compute),
        COMPUTE_DATA_DIR: join(dataDir, "compute"),
        // The session's sandbox must not outlive the test.
        COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
        ...pki.env("compute"),
        ...computeDb,
      }),
      start("agents", "packages/agents/src/main.ts", {
        HOST: host,
        AGENTS_PORT: String(agents),
        AGENTS_GRPC_PORT: String(agentsGrpc),
        AGENTS_DATA_DIR: join(dataDir, "agents"),
        IDENTITY_GRPC_URL: internal(idGrpc!),
        COMPUTE_GRPC_URL: internal(compute!),
        ...pki.env("agents"),
        ...agentsDb,
      }),
      start("router", "packages/runtime/src/router/main.ts", {
        HOST: host,
        ROUTER_PORT: String(router),
        RUNTIME_DATA_DIR: join(dataDir, "runtime"),
        IDENTITY_GRPC_URL: internal(idGrpc!),
        AGENTS_GRPC_URL: internal(agentsGrpc!),
        ...pki.env("runtime-router"),
        RUNTIME_WORKER_TLS_CERT_FILE: worker.certFile,
        RUNTIME_WORKER_TLS_KEY_FILE: worker.keyFile,
        RUNTIME_COLD_START_WAIT_MS: "60000",
      }),
    );
    const end = startDeadline();
    const t0 = Date.now();
    await waitOk(`${identityUrl}/livez`, procs, end);
    await waitOk(`${internal(compute!)}/livez`, procs, end, loadServiceTls(pki.env("operator")));
    await waitOk(`${agentsUrl}/livez`, procs, end);
    await waitOk(`${routerUrl}/readyz`, procs, end);
    console.log(`# four services ready in ${Date.now() - t0} ms`);

    const login = await json<{ access_token: string }>(
      await fetch(`${identityUrl}/v1/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(OWNER),
      }),
    );
    token = login.access_token;
    const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const agent = await json<{ id: string }>(
      await fetch(`${agentsUrl}/v1/agents`, {
        method: "POST",
        headers: { ...auth, "idempotency-key": randomBytes(8).toString("hex") },
        body: JSON.stringify({ name: "E2E", slug: "e2e", model: "dev/echo", systemPrompt: "" }),
      }),
    );
    const session = await json<{ id: string }>(
      await fetch(`${agentsUrl}/v1/sessions`, {
        method: "POST",
        headers: { ...auth, "idempotency-key": randomBytes(8).toString("hex") },
        body: JSON.stringify({ agentId: agent.id }),
      }),
    );
    sessionId = session.id;
  });

  after(async () => {
    await Promise.all(
      procs.reverse().map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null) return resolve();
            const kill = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
            p.child.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            p.child.kill("SIGTERM");
          }),
      ),
    );
    for (const d of databases) await d.close().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
    pki?.remove();
  });

  const invoke = (content: string, headers: Record<string, string> = {}) =>
    fetch(`${routerUrl}/v1/sessions/${sessionId}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: JSON.stringify({ messages: [{ role: "user", content }] }),
    });

  test("a tool call runs in the sandbox and the client sees text chunks then turn_done", async () => {
    const t0 = Date.now();
    const res = await invoke("/bash echo hello-from-the-sandbox", {
      "x-request-id": "e2e-req-1",
      "x-trace-id": "e2e-trace-1",
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const text = await res.text();
    console.log(`# first invoke (cold tenant, sandbox creation): ${Date.now() - t0} ms\n# ${JSON.stringify(text)}`);
    const frames = text.split("\n\n").filter((f) => f && !f.startsWith(":"));
    assert.equal(frames.at(-1), "event: turn_done\ndata: {}", text);
    const chunks = frames.slice(0, -1);
    assert.ok(chunks.length >= 1, text);
    for (const f of chunks) assert.match(f, /^data: [^\n]*$/, `only unnamed text events before turn_done: ${text}`);
    const computeLog = procs
      .find((p) => p.name === "compute")
      ?.log.join("")
      .slice(-3000);
    assert.match(text, /hello-from-the-sandbox/, `${text}\n--- compute log ---\n${computeLog}`);
    assert.doesNotMatch(text, /event: (tool_use|tool_result)/);
  });

  test("a plain message streams the dev model's text; a warm tenant answers", async () => {
    const t0 = Date.now();
    const res = await invoke("hello\nworld");
    const text = await res.text();
    console.log(`# warm invoke: ${Date.now() - t0} ms`);
    assert.equal(res.status, 200);
    assert.match(text, /event: turn_done\ndata: \{\}\n\n$/);
    assert.match(text, /^data: /);
  });

  test("the live tenant worker serves https to the router's certificate only; the router's port has no gRPC", async () => {
    const state = JSON.parse(await readFile(join(dataDir, "runtime", "orchestrator.json"), "utf8")) as {
      deployments: Record<string, { port: number }>;
    };
    const [deployment] = Object.values(state.deployments);
    assert.ok(deployment, "the invokes above made a deployment");
    const url = `https://127.0.0.1:${deployment.port}`;
    assert.equal(await isServing(url, undefined, 5000, undefined, loadServiceTls(pki.env("runtime-router"))), true);
    const call = async (tls: ReturnType<typeof loadServiceTls>) => {
      const client = createClient(RuntimeService, createServiceTransport({ baseUrl: url, tls }));
      for await (const _ of client.invoke({ sessionId }, { headers: { authorization: `Bearer ${token}` } }));
    };
    for (const name of ["agents", "operator", "identity", "compute"]) {
      await assert.rejects(
        call(loadServiceTls(pki.env(name))),
        (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied,
        name,
      );
    }
    const foreign = await makeTestPki(["runtime-router"]);
    try {
      const other = loadServiceTls(foreign.env("runtime-router"));
      await assert.rejects(
        call({ ...other, ca: loadServiceTls(pki.env("runtime-router")).ca }),
        (e: unknown) => e instanceof ConnectError && e.code !== Code.PermissionDenied,
      );
    } finally {
      foreign.remove();
    }
    assert.equal(await isServing(url.replace("https:", "http:")), false, "no plaintext");
    assert.equal(await isServing(routerUrl), false, "the public port serves no gRPC health");
  });

  test("a bad token is 401 at the router", async () => {
    const res = await fetch(`${routerUrl}/v1/sessions/${sessionId}/invoke`, {
      method: "POST",
      headers: { authorization: "Bearer nope", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 401);
  });
});
