// Issue 24 item 2 on the runtime router: /metrics with METRICS_TOKEN on the
// real router (in-process orchestrator, identity and agents doubles, mutual
// TLS between them), a cold start in the histogram and the invoke counted
// under its template; the wake queue gauge while requests wait on a wake.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { IdentityClient } from "@platform/identity-client";
import { IdentityDouble } from "@platform/identity-client/testing";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls, ServerMetrics } from "@platform/rpc";
import { labelValues, parsePrometheusText, sampleSum, scrapeMetrics } from "@platform/rpc/testing/prometheus-text";
import type { EnsureReadyResult } from "../controller/controller.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { InProcessOrchestrator } from "../testing/in-process-orchestrator.ts";
import { registerWakerMetrics } from "./metrics.ts";
import { type RunningRouter, startRouter } from "./router.ts";
import { TenantWaker } from "./waker.ts";

const TOKEN = "router-metrics-token-0123456789abcdef";
const ORG = "0a1b2c3d-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";

let pki: TestPki;
let identity: IdentityDouble;
let agents: AgentsDouble;
let router: RunningRouter;
let jwt: string;

before(async () => {
  pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker"]);
  const tlsOf = (name: string) => loadServiceTls(pki.env(name));
  identity = new IdentityDouble({ tls: tlsOf("identity") });
  agents = new AgentsDouble(tlsOf("agents"));
  await identity.start();
  await agents.start();
  jwt = identity.caller(ORG, USER).token;
  const tls = tlsOf("runtime-router");
  router = await startRouter({
    auth: new IdentityClient(createServiceTransport({ baseUrl: identity.url, tls, expectServer: "identity" })),
    orchestrator: new InProcessOrchestrator(agents.url, tlsOf("runtime-worker")),
    sweeps: false,
    tls,
    metricsToken: TOKEN,
  });
});
after(async () => {
  await router?.close();
  await agents?.close();
  await identity?.stop();
  pki?.remove();
});

const invoke = () =>
  fetch(`${router.url}/v1/sessions/${SESSION}/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${jwt}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
  });

test("the first invoke's cold start is in the histogram, the second is warm; invokes counted by template", async () => {
  const before = await scrapeMetrics(`${router.url}/metrics`, TOKEN);
  assert.equal(sampleSum(before, "platform_runtime_tenant_cold_start_seconds_count"), 0);
  const first = await invoke();
  assert.equal(first.status, 200);
  await first.text();
  const second = await invoke();
  assert.equal(second.status, 200);
  await second.text();

  const fams = await scrapeMetrics(`${router.url}/metrics`, TOKEN);
  assert.equal(fams.get("platform_runtime_tenant_cold_start_seconds")?.type, "histogram");
  const cold = { scale_state: "created", reached: "true" };
  assert.equal(sampleSum(fams, "platform_runtime_tenant_cold_start_seconds_count", cold), 1);
  assert.equal(sampleSum(fams, "platform_runtime_tenant_cold_start_seconds_count"), 1);
  assert.ok(sampleSum(fams, "platform_runtime_tenant_cold_start_seconds_sum", cold) > 0);
  assert.equal(sampleSum(fams, "platform_runtime_wake_queue_length"), 0);
  const route = { server: "runtime-router", method: "POST", route: "/v1/sessions/{session_id}/invoke", code: "200" };
  assert.equal(sampleSum(fams, "platform_http_requests_total", route), 2);
  assert.ok(!labelValues(fams, "platform_http_requests_total", "route").has(`/v1/sessions/${SESSION}/invoke`));
  assert.equal(
    sampleSum(fams, "platform_rpc_server_handled_total", { service: "runtime.v1.RuntimeService", code: "OK" }),
    2,
  );

  const unauthorized = await fetch(`${router.url}/metrics`, { headers: { authorization: `Bearer ${jwt}` } });
  assert.equal(unauthorized.status, 401, "a user's JWT is not the metrics token");
});

test("the wake queue counts the requests waiting on wakes", async () => {
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const waker = new TenantWaker({
    controller: {
      ensureReady: async (): Promise<EnsureReadyResult> => {
        await gate;
        return { deployName: "runtime-t-0a1b2c3d", scaleState: "created" };
      },
      endpoint: async () => "http://127.0.0.1:1",
    },
    waitReachable: async () => true,
  });
  const metrics = new ServerMetrics();
  registerWakerMetrics(metrics.registry, waker);
  const waits = [waker.target("t1", ORG), waker.target("t1", ORG), waker.target("t2", ORG)];
  const during = parsePrometheusText(await metrics.registry.metrics());
  assert.equal(sampleSum(during, "platform_runtime_wake_queue_length"), 3);
  assert.equal(sampleSum(during, "platform_runtime_wakes_in_flight"), 2);
  release();
  await Promise.all(waits);
  const afterwards = parsePrometheusText(await metrics.registry.metrics());
  assert.equal(sampleSum(afterwards, "platform_runtime_wake_queue_length"), 0);
  assert.equal(sampleSum(afterwards, "platform_runtime_wakes_in_flight"), 0);
});
