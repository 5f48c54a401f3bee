import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls, type ServiceTls } from "@platform/rpc";
import { isServing } from "../../health/grpc-health.ts";
import { Metadata } from "../../metadata.ts";
import { AgentsDouble } from "../../testing/agents-double.ts";
import { orchestratorContract } from "../../testing/orchestrator-contract.ts";
import { tempDirs } from "../../testing/temp-dirs.ts";
import type { DeploymentSpec } from "../orchestrator.ts";
import { LocalOrchestrator } from "./local-orchestrator.ts";

const tempDir = tempDirs("runtime-local-");

const TENANT = "7e57a000-0000-4000-8000-000000000001";
// The workers never call agents in these tests; any URL will do. Plaintext
// here: these tests are about processes; mutual TLS has its own below.
const workerEnv = { AGENTS_GRPC_URL: "http://127.0.0.1:9", LOG_LEVEL: "warn", INTERNAL_TLS: "off" };

let pki: TestPki;
before(async () => {
  pki = await makeTestPki(["runtime-router", "runtime-worker", "agents"]);
});
after(() => pki?.remove());
const tlsOf = (name: string) => loadServiceTls(pki.env(name));
/** The router's side of mutual TLS with its workers, as router/main.ts sets it up. */
const orchestratorTls = () => ({ client: tlsOf("runtime-router"), workerFiles: pki.files("runtime-worker") });

function spec(name: string, replicas: number, tenant = TENANT): DeploymentSpec {
  return {
    name,
    replicas,
    labels: { "runtime.platform.io/tenant": "true" },
    annotations: { "runtime.platform.io/tenant-id": tenant },
    serviceAnnotations: { "runtime.platform.io/tenant-id": tenant },
    env: { TENANT_ID: tenant, ORG_ID: tenant },
  };
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

orchestratorContract("local", async () =>
  LocalOrchestrator.open({ dataDir: await tempDir(), workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 }),
);

describe("local orchestrator processes", () => {
  test("replicas 0 is no process; scale-up starts a worker that answers health; a dead worker is restarted; scale-down stops it", async () => {
    const orch = await LocalOrchestrator.open({
      dataDir: await tempDir(),
      workerEnv,
      workerStdio: "ignore",
      scaleWaitMs: 90_000,
    });
    try {
      await orch.createDeployment(spec("runtime-t-aaaa0001", 0));
      assert.equal(orch.pidOf("runtime-t-aaaa0001"), undefined);
      const url = (await orch.endpoint("runtime-t-aaaa0001"))!;
      assert.equal(await isServing(url), false);

      await orch.scaleDeployment("runtime-t-aaaa0001", 1);
      // scale-up returns once the worker is SERVING
      assert.equal(await isServing(url), true);
      assert.equal((await orch.getDeployment("runtime-t-aaaa0001"))?.readyReplicas, 1);
      const first = orch.pidOf("runtime-t-aaaa0001");
      assert.ok(alive(first));

      // A worker that dies is restarted, as a Deployment's pod would be.
      process.kill(first!, "SIGKILL");
      assert.ok(
        await until(async () => {
          const now = orch.pidOf("runtime-t-aaaa0001");
          return now !== undefined && now !== first && (await isServing(url));
        }, 90_000),
        "restarted",
      );
      const pid = orch.pidOf("runtime-t-aaaa0001");

      await orch.scaleDeployment("runtime-t-aaaa0001", 0);
      assert.equal(alive(pid), false);
      assert.equal(orch.pidOf("runtime-t-aaaa0001"), undefined);
      assert.equal((await orch.getDeployment("runtime-t-aaaa0001"))?.readyReplicas, 0);
      assert.equal(await isServing(url), false);
    } finally {
      await orch.close();
    }
  });

  test("state survives a restart: annotations, replicas, endpoint; running workers come back", async () => {
    const dataDir = await tempDir();
    const first = await LocalOrchestrator.open({ dataDir, workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 });
    await first.createDeployment(spec("runtime-t-aaaa0002", 1));
    await first.createDeployment(spec("runtime-t-aaaa0003", 0));
    await first.patchAnnotations("runtime-t-aaaa0002", {
      "runtime.platform.io/last-seen-at": "2026-11-21T10:00:00.000Z",
    });
    const url = await first.endpoint("runtime-t-aaaa0002");
    const pid = first.pidOf("runtime-t-aaaa0002");
    await first.close();
    assert.equal(alive(pid), false, "close stops the workers");

    const second = await LocalOrchestrator.open({ dataDir, workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 });
    try {
      const d = await second.getDeployment("runtime-t-aaaa0002");
      assert.equal(d?.replicas, 1);
      assert.equal(d?.annotations["runtime.platform.io/last-seen-at"], "2026-11-21T10:00:00.000Z");
      assert.equal(d?.annotations["runtime.platform.io/tenant-id"], TENANT);
      assert.equal((await second.getDeployment("runtime-t-aaaa0003"))?.replicas, 0);
      assert.equal(await second.endpoint("runtime-t-aaaa0002"), url);
      assert.ok(await until(() => isServing(url!), 90_000), "the running deployment's worker is restarted");
      assert.equal(second.pidOf("runtime-t-aaaa0003"), undefined);
    } finally {
      await second.close();
    }
  });

  test("no orphans: workers exit when their router is killed with SIGKILL", async () => {
    const dataDir = await tempDir();
    const script = `
      import { LocalOrchestrator } from ${JSON.stringify(new URL("./local-orchestrator.ts", import.meta.url).pathname)};
      const orch = await LocalOrchestrator.open({ dataDir: ${JSON.stringify(dataDir)}, workerEnv: ${JSON.stringify(workerEnv)}, workerStdio: "ignore", scaleWaitMs: 90_000 });
      await orch.createDeployment(${JSON.stringify(spec("runtime-t-aaaa0005", 1))});
      console.log(orch.pidOf("runtime-t-aaaa0005"));
      setInterval(() => {}, 1000);
    `;
    const router = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const workerPid = await new Promise<number>((resolve, reject) => {
      let out = "";
      router.stdout.on("data", (c) => {
        out += c;
        const m = /(\d+)\n/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      router.once("exit", () => reject(new Error(`router exited early: ${out}`)));
    });
    assert.ok(alive(workerPid));
    router.kill("SIGKILL");
    assert.ok(await until(() => !alive(workerPid), 30_000), "worker exits once its router is gone");
  });
});

/** Invokes a worker as the router would (with `tls`, its certificate), as a user of `tenant`; the event cases it streams. */
async function invokeAs(url: string, tenant: string, tls?: ServiceTls): Promise<(string | undefined)[]> {
  const client = createClient(RuntimeService, createServiceTransport({ baseUrl: url, tls }));
  const headers = {
    [Metadata.authorization]: "Bearer tok.en.sig",
    [Metadata.tenantId]: tenant,
    [Metadata.orgId]: tenant,
    [Metadata.userId]: "11111111-0000-4000-8000-000000000002",
  };
  const cases: (string | undefined)[] = [];
  for await (const e of client.invoke(
    { sessionId: "5e551000-0000-4000-8000-000000000003", messages: [{ role: "user", content: "hi" }] },
    { headers },
  )) {
    cases.push(e.event.case);
  }
  return cases;
}

const unauthenticated = (err: unknown) => err instanceof ConnectError && err.code === Code.Unauthenticated;

describe("local orchestrator spare worker", () => {
  const OTHER = "7e57a000-0000-4000-8000-0000000000b2";

  test("a scale-up adopts the spare, which then serves that tenant only (mutual TLS, to the router only); a new spare replaces it; at zero the tenant has no process", async () => {
    const agents = new AgentsDouble(tlsOf("agents"));
    const agentsUrl = await agents.start();
    const orch = await LocalOrchestrator.open({
      dataDir: await tempDir(),
      workerEnv: { AGENTS_GRPC_URL: agentsUrl, LOG_LEVEL: "warn" },
      tls: orchestratorTls(),
      workerStdio: "ignore",
      scaleWaitMs: 90_000,
    });
    const router = tlsOf("runtime-router");
    try {
      assert.ok(await until(() => orch.sparePid() !== undefined, 90_000), "a spare starts with the orchestrator");
      const firstSpare = orch.sparePid();
      await orch.createDeployment(spec("runtime-t-bbbb0001", 1));
      assert.equal(orch.pidOf("runtime-t-bbbb0001"), firstSpare, "the deployment adopted the spare");
      assert.ok(
        await until(() => orch.sparePid() !== undefined && orch.sparePid() !== firstSpare, 90_000),
        "a new spare",
      );
      const secondSpare = orch.sparePid();
      await orch.createDeployment(spec("runtime-t-bbbb0002", 1, OTHER));
      assert.equal(orch.pidOf("runtime-t-bbbb0002"), secondSpare);

      // Each adopted worker has its own deployment's environment and nobody else's.
      const first = (await orch.endpoint("runtime-t-bbbb0001"))!;
      const second = (await orch.endpoint("runtime-t-bbbb0002"))!;
      assert.match(first, /^https:/);
      assert.deepEqual(await invokeAs(first, TENANT, router), ["textChunk", "turnDone"]);
      assert.deepEqual(await invokeAs(second, OTHER, router), ["textChunk", "turnDone"]);
      await assert.rejects(invokeAs(first, OTHER, router), unauthenticated);
      await assert.rejects(invokeAs(second, TENANT, router), unauthenticated);
      // The adopted spare admits the router's certificate only.
      await assert.rejects(
        invokeAs(first, TENANT, tlsOf("agents")),
        (err: unknown) => err instanceof ConnectError && err.code === Code.PermissionDenied,
      );
      assert.deepEqual(
        agents.calls.map((c) => c.headers["x-tenant-id"]),
        [TENANT, OTHER],
      );

      // Scale to zero stops the adopted process itself: it never goes back to being a spare.
      await orch.scaleDeployment("runtime-t-bbbb0001", 0);
      assert.equal(alive(firstSpare), false);
      assert.equal(orch.pidOf("runtime-t-bbbb0001"), undefined);
      assert.notEqual(orch.sparePid(), firstSpare);
      assert.equal(await isServing(first, undefined, 1000, undefined, router), false);
    } finally {
      await orch.close();
      await agents.close();
    }
  });

  test("without a spare a scale-up starts a worker of its own (from the bundle, with the worker certificate)", async () => {
    const orch = await LocalOrchestrator.open({
      dataDir: await tempDir(),
      // INTERNAL_TLS and TLS_* are the orchestrator's to set when it has the workers' certificate.
      workerEnv: {
        AGENTS_GRPC_URL: "https://127.0.0.1:9",
        LOG_LEVEL: "warn",
        INTERNAL_TLS: "off",
        TLS_CERT_FILE: "/nowhere.crt",
      },
      tls: orchestratorTls(),
      workerStdio: "ignore",
      scaleWaitMs: 90_000,
      spareWorker: false,
    });
    try {
      await orch.createDeployment(spec("runtime-t-bbbb0003", 1));
      const url = (await orch.endpoint("runtime-t-bbbb0003"))!;
      assert.match(url, /^https:/);
      assert.equal(await isServing(url, undefined, 5000, undefined, tlsOf("runtime-router")), true);
      assert.equal(await isServing(url.replace("https:", "http:")), false, "no plaintext");
      assert.equal(orch.sparePid(), undefined);
      // From the prebuilt bundle, not through tsx.
      const cmdline = readFileSync(`/proc/${orch.pidOf("runtime-t-bbbb0003")}/cmdline`, "utf8").split("\0");
      assert.ok(
        cmdline.some((a) => /runtime-worker\/worker-[0-9a-f]+\.cjs$/.test(a)),
        cmdline.join(" "),
      );
      assert.ok(!cmdline.includes("tsx"));
    } finally {
      await orch.close();
    }
  });

  test("a spare that dies before use is replaced; close stops it", async () => {
    const orch = await LocalOrchestrator.open({
      dataDir: await tempDir(),
      workerEnv,
      workerStdio: "ignore",
      scaleWaitMs: 90_000,
    });
    let spare: number | undefined;
    try {
      assert.ok(await until(() => orch.sparePid() !== undefined, 90_000));
      const dead = orch.sparePid()!;
      process.kill(dead, "SIGKILL");
      assert.ok(await until(() => orch.sparePid() !== undefined && orch.sparePid() !== dead, 90_000), "replaced");
      spare = orch.sparePid();
      await orch.createDeployment(spec("runtime-t-bbbb0004", 1));
      assert.equal(orch.pidOf("runtime-t-bbbb0004"), spare);
      assert.equal(await isServing((await orch.endpoint("runtime-t-bbbb0004"))!), true);
      assert.ok(await until(() => orch.sparePid() !== undefined && orch.sparePid() !== spare, 90_000));
      spare = orch.sparePid();
    } finally {
      await orch.close();
    }
    assert.equal(alive(spare), false, "close stops the spare");
  });

  test("an idle spare does not keep its router process running, and exits with it", async () => {
    const script = `
      import { LocalOrchestrator } from ${JSON.stringify(new URL("./local-orchestrator.ts", import.meta.url).pathname)};
      const orch = await LocalOrchestrator.open({ dataDir: ${JSON.stringify(await tempDir())}, workerEnv: ${JSON.stringify(workerEnv)}, workerStdio: "ignore" });
      while (orch.sparePid() === undefined) await new Promise((r) => setTimeout(r, 20));
      console.log(orch.sparePid());
    `;
    const router = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    router.stdout.on("data", (c) => {
      out += c;
    });
    const code = await new Promise<number | null>((resolve) => router.once("exit", resolve));
    assert.equal(code, 0, "the router process ended on its own");
    const sparePid = Number(/(\d+)/.exec(out)?.[1]);
    assert.ok(sparePid > 0);
    assert.ok(await until(() => !alive(sparePid), 30_000), "the spare exits once its router is gone");
  });
});
