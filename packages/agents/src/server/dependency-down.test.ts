// Issue 15 item 7 on the real agents server: a dependency that is down is
// the caller's 503 `unavailable` with Retry-After, never a 500: its
// PostgreSQL (a private cluster this test stops, never the shared server),
// the identity service (asked for every credential) and the compute service
// (asked to destroy a session's sandbox). Each answers again once it is back.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openDatabase } from "@platform/db";
import { type PrivateCluster, startPrivateCluster } from "@platform/db/testing-pg-cluster";
import pino from "pino";
import type { AgentsDB } from "../db/schema.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { type Caller, IdentityDouble } from "@platform/identity-client/testing";

let cluster: PrivateCluster;
let service: AgentsServer;
let base: string;
let caller: Caller;
const identity = new IdentityDouble();
const compute = new ComputeDouble();

before(async () => {
  cluster = await startPrivateCluster();
  const database = await openDatabase<AgentsDB>({ url: await cluster.database("agents"), minConnections: 0 });
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    { runLeaseMs: 3000 },
  );
  const providers = new ProviderRegistry().register("dev", new DevModel());
  service = await createAgentsServer(config, pino({ level: "silent" }), {
    providers,
    database,
    pollMs: 200,
    internalTls: undefined,
  });
  ({ url: base } = await service.listen());
  caller = identity.caller();
});
after(async () => {
  await service?.close().catch(() => {});
  await identity.stop().catch(() => {});
  await compute.stop().catch(() => {});
  cluster?.destroy();
});

async function call(method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${caller.token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get("retry-after"),
    text,
    json: text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined,
  };
}

function assertUnavailable(r: Awaited<ReturnType<typeof call>>, what: string) {
  assert.equal(r.status, 503, `${what}: ${r.status} ${r.text}`);
  assert.equal(r.json.error.code, "unavailable", what);
  assert.ok(Number(r.retryAfter) >= 1, `${what}: Retry-After ${r.retryAfter}`);
}

/** Polls until `path` answers 200 again, at most 20 s. */
async function servedAgain(path: string) {
  const started = performance.now();
  for (;;) {
    const r = await call("GET", path);
    if (r.status === 200) return performance.now() - started;
    assert.ok(
      performance.now() - started < 20_000,
      `${path} not served 20 s after its dependency came back (${r.status} ${r.text})`,
    );
    await sleep(200);
  }
}

test("each dependency down answers 503 unavailable + Retry-After, and the service serves again when it is back", async () => {
  const agent = await call("POST", "/v1/agents", { name: "Outage", slug: "outage", model: "dev/echo" });
  assert.equal(agent.status, 201, agent.text);
  const session = await call("POST", "/v1/sessions", { agentId: agent.json.id });
  assert.equal(session.status, 201, session.text);
  // A tool call makes the session's sandbox, so deleting the session asks compute.
  const run = await fetch(`${base}/v1/sessions/${session.json.id}/messages`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${caller.token}`,
      "content-type": "application/json",
      accept: "text/event-stream",
    },
    body: JSON.stringify({ messages: [{ role: "user", content: "run: echo hi" }] }),
  });
  assert.match(await run.text(), /tool_result/);

  const seen: string[] = [];

  // The database.
  cluster.stop("immediate");
  for (const [method, path] of [
    ["GET", `/v1/agents/${agent.json.id}`],
    ["GET", `/v1/sessions/${session.json.id}`],
    ["GET", "/v1/agents"],
  ] as const) {
    const r = await call(method, path);
    assertUnavailable(r, `${method} ${path} with the database down`);
    seen.push(`database down: ${method} ${path} → ${r.status} retry-after=${r.retryAfter}`);
  }
  assert.equal((await fetch(`${base}/readyz`)).status, 503);
  cluster.start();
  seen.push(`database back: served again after ${(await servedAgain(`/v1/agents/${agent.json.id}`)).toFixed(0)} ms`);

  // Identity, which verifies every credential.
  await identity.stop();
  const noIdentity = await call("GET", `/v1/agents/${agent.json.id}`);
  assertUnavailable(noIdentity, "identity down");
  seen.push(`identity down: → ${noIdentity.status} retry-after=${noIdentity.retryAfter}`);
  await identity.start();
  seen.push(`identity back: served again after ${(await servedAgain(`/v1/agents/${agent.json.id}`)).toFixed(0)} ms`);

  // Compute, asked to destroy the session's sandbox: the session stays, the delete can be retried.
  await compute.stop();
  const noCompute = await call("DELETE", `/v1/sessions/${session.json.id}`);
  assertUnavailable(noCompute, "compute down");
  seen.push(`compute down: DELETE session → ${noCompute.status} retry-after=${noCompute.retryAfter}`);
  assert.equal((await call("GET", `/v1/sessions/${session.json.id}`)).status, 200);
  console.log(seen.join("\n"));
});
