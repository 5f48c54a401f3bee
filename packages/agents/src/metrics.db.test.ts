// Issue 24 item 2 on the real agents service (in-process, identity and
// compute doubles): /metrics on both ports with METRICS_TOKEN, a held run
// shows as running (and local) with its SSE stream open, both drop when it
// ends, and requests are counted by route template, never by id.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { IdentityDouble } from "@platform/identity-client/testing";
import { type Family, labelValues, sampleSum, scrapeMetrics } from "@platform/rpc/testing/prometheus-text";
import pino from "pino";
import { type AgentsServer, createAgentsServer } from "./process.ts";
import { ProviderRegistry } from "./providers/registry.ts";
import { ComputeDouble } from "./testing/compute-double.ts";
import { testAgentsConfig } from "./testing/config.ts";
import { gate, ScriptedModel } from "./testing/scripted-model.ts";
import { createAgentsTestDatabase } from "./testing/database.ts";

const TOKEN = "agents-metrics-token-0123456789abcdef";
let service: AgentsServer;
let base: string;
let grpcBase: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const scripted = new ScriptedModel();

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    { metricsToken: TOKEN },
  );
  service = await createAgentsServer(config, pino({ level: "silent" }), {
    providers: new ProviderRegistry().register("scripted", scripted),
    database,
    pollMs: 200,
    internalTls: undefined,
  });
  ({ url: base, grpcUrl: grpcBase } = await service.listen());
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

const scrape = (at = base) => scrapeMetrics(`${at}/metrics`, TOKEN);
const runs = (f: Map<string, Family>, state: string) => sampleSum(f, "platform_agents_runs", { state });

test("a run shows as running with its SSE stream open, and neither once it is done", async () => {
  const { token } = identity.caller();
  const json = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const agent = (await (
    await fetch(`${base}/v1/agents`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ name: "M", slug: `m-${Date.now()}`, model: "scripted/x" }),
    })
  ).json()) as { id: string };
  const session = (await (
    await fetch(`${base}/v1/sessions`, { method: "POST", headers: json, body: JSON.stringify({ agentId: agent.id }) })
  ).json()) as { id: string };
  const before = await scrape();
  assert.equal(runs(before, "running"), 0);

  const hold = gate();
  scripted.push([
    { type: "text", text: "working" },
    { type: "wait", until: hold.promise },
    { type: "text", text: " done" },
  ]);
  const res = await fetch(`${base}/v1/sessions/${session.id}/messages`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ messages: [{ role: "user", content: "go" }] }),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  assert.match(new TextDecoder().decode((await reader.read()).value), /working/);

  const during = await scrape();
  assert.equal(runs(during, "running"), 1);
  assert.equal(sampleSum(during, "platform_agents_runs_local"), 1);
  const sse = { server: "agents", route: "/v1/sessions/{id}/messages" };
  assert.equal(sampleSum(during, "platform_sse_streams_open", sse), 1);
  assert.equal(sampleSum(during, "platform_rpc_server_streams_open", { server: "agents" }), 1);

  hold.open();
  let rest = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
  assert.match(rest, /"type":"done"/);
  await service.app.runner.idle();

  const after = await scrape();
  assert.equal(runs(after, "running"), 0);
  assert.equal(sampleSum(after, "platform_agents_runs_local"), 0);
  assert.equal(sampleSum(after, "platform_sse_streams_open", sse), 0);
  assert.equal(
    sampleSum(after, "platform_http_requests_total", { ...sse, method: "POST", code: "200" }) -
      sampleSum(before, "platform_http_requests_total", { ...sse, method: "POST", code: "200" }),
    1,
  );
  assert.ok(sampleSum(after, "platform_http_requests_total", { route: "/v1/sessions", code: "201" }) >= 1);
  for (const route of labelValues(after, "platform_http_requests_total", "route")) {
    assert.ok(!route.includes(session.id) && !route.includes(agent.id), route);
  }
  // The internal port serves the same registry.
  const internal = await scrape(grpcBase);
  assert.ok(sampleSum(internal, "platform_http_requests_total", { server: "agents", route: "/v1/agents" }) >= 1);
});

test("/metrics without the token is 401 on both ports", async () => {
  for (const at of [base, grpcBase]) {
    const r = await fetch(`${at}/metrics`);
    assert.equal(r.status, 401, at);
    assert.doesNotMatch(await r.text(), /platform_/);
  }
});
