import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { isServing } from "../health/grpc-health.ts";
import { LocalOrchestrator } from "../orchestrator/local/local-orchestrator.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { IdentityClient } from "@platform/identity-client";
import { type RunningRouter, startRouter } from "./router.ts";

const ORG = "0a1b2c3d-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";
const DEPLOY = "runtime-t-0a1b2c3d";

// The embedded shape's path over mutual TLS: the router's certificate to
// identity and the workers, the workers' (handed over by the orchestrator,
// spare included) to agents.
describe("router with the local orchestrator (real worker processes, mutual TLS)", () => {
  let pki: TestPki;
  const tlsOf = (name: string) => loadServiceTls(pki.env(name));
  let identity: IdentityDouble;
  let agents: AgentsDouble;
  let dataDir: string;
  let orch: LocalOrchestrator;
  let router: RunningRouter;
  let token: string;

  before(async () => {
    pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker"]);
    identity = new IdentityDouble({ tls: tlsOf("identity") });
    agents = new AgentsDouble(tlsOf("agents"));
    await identity.start();
    await agents.start();
    token = identity.caller(ORG, USER).token;
    dataDir = await mkdtemp(join(tmpdir(), "runtime-router-local-"));
    const tls = tlsOf("runtime-router");
    orch = await LocalOrchestrator.open({
      dataDir,
      workerEnv: { AGENTS_GRPC_URL: agents.url, LOG_LEVEL: "warn" },
      tls: { client: tls, workerFiles: pki.files("runtime-worker") },
      workerStdio: "ignore",
      scaleWaitMs: 90_000,
    });
    router = await startRouter({
      auth: new IdentityClient(createServiceTransport({ baseUrl: identity.url, tls, expectServer: "identity" })),
      orchestrator: orch,
      tls,
      sweeps: false,
      // The spec's 10 s is for production; a loaded test machine can take
      // longer to start node + tsx (the 10 s default is tested in waker.test.ts).
      reachTimeoutMs: 90_000,
    });
  });
  after(async () => {
    await router.close(); // closes the orchestrator: stops the workers
    await agents.close();
    await identity.stop();
    await rm(dataDir, { recursive: true, force: true });
    pki.remove();
  });

  const invoke = async () => {
    const res = await fetch(`${router.url}/v1/sessions/${SESSION}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
    return { status: res.status, text: await res.text() };
  };

  test("first request creates the worker; at zero replicas the next one wakes it", async () => {
    assert.deepEqual(await invoke(), { status: 200, text: "data: hello\n\nevent: turn_done\ndata: {}\n\n" });
    const pid = orch.pidOf(DEPLOY);
    assert.ok(pid);
    // The worker process serves https to the router's certificate only.
    const url = (await orch.endpoint(DEPLOY))!;
    assert.match(url, /^https:\/\//);
    assert.equal(await isServing(url, undefined, 5000, undefined, tlsOf("runtime-router")), true);
    const asAgents = createClient(RuntimeService, createServiceTransport({ baseUrl: url, tls: tlsOf("agents") }));
    await assert.rejects(
      (async () => {
        for await (const _ of asAgents.invoke(
          { sessionId: SESSION },
          { headers: { authorization: `Bearer ${token}` } },
        ));
      })(),
      (err: unknown) => err instanceof ConnectError && err.code === Code.PermissionDenied,
    );

    // IdleSweep's effect: the process goes away.
    await orch.scaleDeployment(DEPLOY, 0);
    assert.equal(orch.pidOf(DEPLOY), undefined);
    assert.equal(await isServing(url, undefined, 1000, undefined, tlsOf("runtime-router")), false);

    const t0 = Date.now();
    const results = await Promise.all([invoke(), invoke(), invoke()]);
    for (const r of results)
      assert.deepEqual(r, { status: 200, text: "data: hello\n\nevent: turn_done\ndata: {}\n\n" });
    const pid2 = orch.pidOf(DEPLOY);
    assert.ok(pid2 && pid2 !== pid);
    assert.equal((await orch.getDeployment(DEPLOY))?.replicas, 1);
    console.log(`# cold start through the router with a real worker process: ${Date.now() - t0} ms`);
  });
});
