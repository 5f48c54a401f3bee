// Issue 24 item 2 on a tenant worker: with METRICS_TOKEN, GET /metrics on its
// mutual-TLS port counts the router's Invoke calls; without the token, 401.
import assert from "node:assert/strict";
import https from "node:https";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { parsePrometheusText, sampleSum } from "@platform/rpc/testing/prometheus-text";
import { Metadata } from "../metadata.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { type RunningServer, startWorker } from "./worker.ts";

const TOKEN = "worker-metrics-token-0123456789abcdef";
const TENANT = "7e57a000-0000-4000-8000-000000000001";
let pki: TestPki;
let agents: AgentsDouble;
let worker: RunningServer;

before(async () => {
  pki = await makeTestPki(["runtime-router", "runtime-worker", "agents", "operator"]);
  agents = new AgentsDouble(loadServiceTls(pki.env("agents")));
  worker = await startWorker({
    tenantId: TENANT,
    orgId: TENANT,
    agentsUrl: await agents.start(),
    port: 0,
    host: "127.0.0.1",
    tls: loadServiceTls(pki.env("runtime-worker")),
    metricsToken: TOKEN,
  });
});
after(async () => {
  await worker?.close();
  await agents?.close();
  pki?.remove();
});

function get(token: string | null): Promise<{ status: number; body: string }> {
  const tls = loadServiceTls(pki.env("operator"));
  return new Promise((resolve, reject) => {
    https
      .get(
        `${worker.url}/metrics`,
        { ca: tls.ca, cert: tls.cert, key: tls.key, headers: token ? { authorization: `Bearer ${token}` } : {} },
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

test("the router's Invoke calls are counted on the worker's /metrics; the token is required", async () => {
  const client = createClient(
    RuntimeService,
    createServiceTransport({ baseUrl: worker.url, tls: loadServiceTls(pki.env("runtime-router")) }),
  );
  const headers = {
    [Metadata.authorization]: "Bearer tok.en.sig",
    [Metadata.tenantId]: TENANT,
    [Metadata.orgId]: TENANT,
    [Metadata.userId]: "11111111-0000-4000-8000-000000000002",
  };
  for await (const _ of client.invoke(
    { sessionId: "5e551000-0000-4000-8000-000000000003", messages: [{ role: "user", content: "hi" }] },
    { headers },
  )) {
    // drained
  }
  const r = await get(TOKEN);
  assert.equal(r.status, 200, r.body);
  const fams = parsePrometheusText(r.body);
  const invoke = { server: "runtime-worker", service: "runtime.v1.RuntimeService", method: "Invoke", code: "OK" };
  assert.equal(sampleSum(fams, "platform_rpc_server_handled_total", invoke), 1);
  assert.equal(sampleSum(fams, "platform_rpc_server_streams_open", { server: "runtime-worker" }), 0);
  for (const token of [null, "worker-metrics-token-wrong-0123456789"]) {
    const refused = await get(token);
    assert.equal(refused.status, 401);
    assert.doesNotMatch(refused.body, /platform_/);
  }
});
