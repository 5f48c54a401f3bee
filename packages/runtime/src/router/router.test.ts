import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import * as http from "node:http";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { PlatformError } from "@platform/errors";
import { Health } from "@platform/gen/grpc/health/v1/health_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { Annotation } from "../controller/labels.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { InProcessOrchestrator } from "../testing/in-process-orchestrator.ts";
import { IdentityClient } from "@platform/identity-client";
import { type RunningRouter, startRouter } from "./router.ts";

const ORG = "0a1b2c3d-0000-4000-8000-000000000001";
const ORG2 = "9f8e7d6c-0000-4000-8000-000000000002";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";
const DEPLOY = "runtime-t-0a1b2c3d";

// Every internal hop is mutual TLS, as deployed: router → identity (VerifyJWT),
// router → worker, worker → agents, each with its own certificate.
describe("router", () => {
  let pki: TestPki;
  const tlsOf = (name: string) => loadServiceTls(pki.env(name));
  let identity: IdentityDouble;
  let agents: AgentsDouble;
  let orch: InProcessOrchestrator;
  let router: RunningRouter;
  let token: string;

  async function boot(opts: { reachTimeoutMs?: number; maxWaitersPerTenant?: number } = {}) {
    await router?.close();
    orch = new InProcessOrchestrator(agents.url, tlsOf("runtime-worker"));
    const tls = tlsOf("runtime-router");
    router = await startRouter({
      auth: new IdentityClient(createServiceTransport({ baseUrl: identity.url, tls, expectServer: "identity" })),
      orchestrator: orch,
      sweeps: false,
      tls,
      ...opts,
    });
  }

  before(async () => {
    pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker"]);
    identity = new IdentityDouble({ tls: tlsOf("identity") });
    agents = new AgentsDouble(tlsOf("agents"));
    await identity.start();
    await agents.start();
    token = identity.caller(ORG, USER).token;
    await boot();
  });
  after(async () => {
    await router.close();
    await agents.close();
    await identity.stop();
    pki.remove();
  });
  beforeEach(() => {
    agents.calls.length = 0;
    agents.delayMs = 0;
    agents.script = () => [{ type: "text", content: "hello" }, { type: "done" }];
  });

  function invoke(body?: unknown, headers: Record<string, string> = {}, session = SESSION) {
    return fetch(`${router.url}/v1/sessions/${session}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }
  const hi = { messages: [{ role: "user", content: "hi" }] };

  test("missing, malformed or rejected JWT is 401 and wakes nothing", async () => {
    for (const authorization of [undefined, "Basic abc", "Bearer", "Bearer not-a-known-token"]) {
      const res = await fetch(`${router.url}/v1/sessions/${SESSION}/invoke`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(hi),
      });
      assert.equal(res.status, 401, String(authorization));
      const body = (await res.json()) as { error: { code: string } };
      assert.equal(body.error.code, "unauthenticated");
    }
    assert.equal(orch.records.calls.filter((c) => !c.startsWith("get")).length, 0);
  });

  test("streams SSE exactly per the spec and forwards tenant metadata and ids", async () => {
    agents.script = () => [
      { type: "text", content: "line one\nline two" },
      { type: "tool_use", content: "bash {}" },
      { type: "tool_result", content: "ok" },
      { type: "text", content: "end" },
      { type: "done", tokensIn: 3n, tokensOut: 4n },
    ];
    const res = await invoke(hi, { "x-request-id": "req-abc", "x-trace-id": "trace-xyz" });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(await res.text(), "data: line one\\nline two\n\ndata: end\n\nevent: turn_done\ndata: {}\n\n");
    const call = agents.calls.find((c) => c.method === "sendMessages")!;
    assert.equal(call.headers.authorization, `Bearer ${token}`);
    assert.equal(call.headers["x-tenant-id"], ORG);
    assert.equal(call.headers["x-org-id"], ORG);
    assert.equal(call.headers["x-user-id"], USER);
    assert.equal(call.headers["x-request-id"], "req-abc");
    assert.equal(call.headers["x-trace-id"], "trace-xyz");
    assert.equal((call.request as { messages: Array<{ content: string }> }).messages[0]?.content, "hi");
    const d = await orch.getDeployment(DEPLOY);
    assert.equal(d?.replicas, 1);
    assert.equal(d?.annotations[Annotation.orgId], ORG);
  });

  test("request and trace ids are generated when absent and match the response headers", async () => {
    const res = await invoke(hi);
    await res.text();
    const call = agents.calls.find((c) => c.method === "sendMessages")!;
    assert.ok(call.headers["x-request-id"]);
    assert.equal(call.headers["x-request-id"], res.headers.get("x-request-id"));
    assert.equal(call.headers["x-trace-id"], res.headers.get("x-trace-id"));
  });

  test("a body without messages rejoins the session (turn_done when idle)", async () => {
    agents.session = { session: { id: SESSION, status: "idle" }, events: [] };
    const res = await invoke();
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "event: turn_done\ndata: {}\n\n");
  });

  test("agents error and mid-stream failures arrive as the error event", async () => {
    agents.script = () => [
      { type: "text", content: "a" },
      { type: "error", content: "model provider unreachable" },
    ];
    let res = await invoke(hi);
    assert.equal(await res.text(), 'data: a\n\nevent: error\ndata: {"message":"model provider unreachable"}\n\n');
    agents.script = () => [
      { type: "text", content: "a" },
      { type: "__throw", content: "connection reset" },
    ];
    res = await invoke(hi);
    assert.equal(res.status, 200);
    const text = await res.text();
    // A failure of the worker's agents client is not the agents' answer: its text stays in the log.
    assert.equal(text, 'data: a\n\nevent: error\ndata: {"message":"agents call failed"}\n\n');
    // The agents service's own answers are relayed, its internal errors as generic as it sent them.
    agents.script = () => new Error("boom at postgres://db");
    res = await invoke(hi);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'event: error\ndata: {"message":"agents call failed: internal error"}\n\n');
  });

  test("the agents service's refusal of the request is its HTTP status, before any stream", async () => {
    for (const [err, status, code] of [
      [PlatformError.notFound("session not found"), 404, "not_found"],
      [PlatformError.invalidArgument("messages must not be empty"), 400, "invalid_argument"],
      [PlatformError.failedPrecondition("a run is in progress"), 400, "failed_precondition"],
    ] as const) {
      agents.script = () => err;
      const res = await invoke(hi);
      assert.equal(res.status, status);
      assert.equal(res.headers.get("content-type"), "application/json");
      assert.deepEqual(await res.json(), { error: { code, message: err.message } });
    }
  });

  test("hostile x-request-id / x-trace-id (UTF-8 bytes, too long) over REST: replaced, the call works", async () => {
    const utf8 = Buffer.from("日本-ñ", "utf8").toString("latin1");
    // fetch refuses such header values; node:http sends them as the bytes they are.
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${router.url}/v1/sessions/${SESSION}/invoke`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "x-request-id": utf8,
          "x-trace-id": "t".repeat(500),
        },
      });
      req.on("response", (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end(JSON.stringify({ ...hi, requestId: "日本", traceId: "日本" }));
    });
    assert.equal(status, 200);
    const call = agents.calls.find((c) => c.method === "sendMessages")!;
    assert.match(call.headers["x-request-id"] ?? "", /^[0-9a-f-]{36}$/);
    assert.match(call.headers["x-trace-id"] ?? "", /^[0-9a-f]{32}$/);
  });

  test("the public port serves REST/SSE and health endpoints only: no gRPC, Connect, gRPC-Web, gRPC health or reflection", async () => {
    const verified = identity.verifyCalls;
    const grpc = createClient(RuntimeService, createGrpcTransport({ baseUrl: router.url }));
    const grpcCall = async () => {
      for await (const _ of grpc.invoke(
        { sessionId: SESSION, messages: [{ role: "user", content: "hi" }] },
        { headers: { authorization: `Bearer ${token}` } },
      ));
    };
    await assert.rejects(grpcCall(), ConnectError);
    const health = createClient(Health, createGrpcTransport({ baseUrl: router.url }));
    await assert.rejects(health.check({}), ConnectError);
    for (const [path, contentType] of [
      ["/runtime.v1.RuntimeService/Invoke", "application/connect+proto"],
      ["/runtime.v1.RuntimeService/Invoke", "application/grpc-web+proto"],
      ["/grpc.health.v1.Health/Check", "application/json"],
      ["/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "application/grpc-web+proto"],
    ]) {
      const res = await fetch(`${router.url}${path}`, {
        method: "POST",
        headers: { "content-type": contentType!, authorization: `Bearer ${token}` },
        body: "",
      });
      assert.equal(res.status, 404, `${path} ${contentType}`);
      await res.text();
    }
    assert.equal(identity.verifyCalls, verified, "no procedure call got as far as authentication");
    assert.equal(agents.calls.length, 0, "nothing was forwarded");
    assert.equal((await fetch(`${router.url}/livez`)).status, 200);
    assert.equal((await invoke(hi)).status, 200);
  });

  test("a malformed session id is 400", async () => {
    const res = await invoke(hi, {}, "not-a-uuid");
    assert.equal(res.status, 400);
  });

  test("last-seen-at is updated after each forward", async () => {
    await orch.patchAnnotations(DEPLOY, { [Annotation.lastSeenAt]: "2000-01-01T00:00:00.000Z" });
    await (await invoke(hi)).text();
    await new Promise((r) => setTimeout(r, 50));
    const seen = Date.parse((await orch.getDeployment(DEPLOY))?.annotations[Annotation.lastSeenAt] ?? "");
    assert.ok(Date.now() - seen < 5000, `last-seen-at ${seen}`);
  });

  test("cold start: at zero replicas the router scales up, waits and answers", async () => {
    await boot();
    await (await invoke(hi)).text(); // created
    await orch.scaleDeployment(DEPLOY, 0);
    orch.startDelayMs = 300;
    const before = orch.starts;
    const res = await invoke(hi);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "data: hello\n\nevent: turn_done\ndata: {}\n\n");
    assert.equal(orch.starts, before + 1);
    assert.ok(orch.records.calls.includes(`scaleDeployment:${DEPLOY}`));
    orch.startDelayMs = 0;
  });

  test("a worker gone behind a trusted route is woken and the call retried once", async () => {
    await boot();
    await (await invoke(hi)).text();
    await orch.scaleDeployment(DEPLOY, 0); // as IdleSweep would, right after a request
    const res = await invoke(hi);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "data: hello\n\nevent: turn_done\ndata: {}\n\n");
  });

  test("a worker that never becomes reachable is 503 with Retry-After: 5", async () => {
    await boot({ reachTimeoutMs: 300 });
    orch.broken = true;
    const res = await invoke(hi);
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), "5");
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(body.error.code, "unavailable");
  });

  test("single flight: concurrent requests for a sleeping tenant cause one wake", async () => {
    await boot();
    await (await invoke(hi)).text();
    await orch.scaleDeployment(DEPLOY, 0);
    let release!: () => void;
    orch.gate = new Promise((r) => (release = r));
    const before = orch.starts;
    const scalesBefore = orch.records.calls.filter((c) => c === `scaleDeployment:${DEPLOY}`).length;
    const getsBefore = orch.records.calls.filter((c) => c === `getDeployment:${DEPLOY}`).length;
    const pending = Array.from({ length: 8 }, () => invoke(hi).then(async (r) => [r.status, await r.text()] as const));
    // All eight wait on the one wake before it is let go.
    while (router.waker.waiting(ORG) < 8) await new Promise((r) => setTimeout(r, 20));
    release();
    const results = await Promise.all(pending);
    orch.gate = undefined;
    for (const [status, text] of results) {
      assert.equal(status, 200);
      assert.equal(text, "data: hello\n\nevent: turn_done\ndata: {}\n\n");
    }
    assert.equal(orch.starts, before + 1);
    assert.equal(orch.records.calls.filter((c) => c === `scaleDeployment:${DEPLOY}`).length, scalesBefore + 1);
    // One EnsureReady for the whole burst: its lookup plus the in-process
    // orchestrator's own read while scaling.
    assert.equal(orch.records.calls.filter((c) => c === `getDeployment:${DEPLOY}`).length - getsBefore, 2);
  });

  test("past the per-tenant waiting bound, requests get 503 at once", async () => {
    await boot({ maxWaitersPerTenant: 3, reachTimeoutMs: 60_000 });
    let release!: () => void;
    orch.gate = new Promise((r) => (release = r));
    const pending = Array.from({ length: 6 }, () =>
      invoke(hi).then(async (r) => ({
        status: r.status,
        retryAfter: r.headers.get("retry-after"),
        text: await r.text(),
      })),
    );
    // The three beyond the bound are answered while the wake is still held.
    const rejected: Array<{ status: number; retryAfter: string | null }> = [];
    for (const p of pending) void p.then((r) => r.status === 503 && rejected.push(r));
    while (rejected.length < 3) await new Promise((r) => setTimeout(r, 20));
    assert.equal(router.waker.waiting(ORG), 3);
    for (const r of rejected) assert.equal(r.retryAfter, "5");
    release();
    const results = await Promise.all(pending);
    assert.equal(results.filter((r) => r.status === 200).length, 3);
    assert.equal(results.filter((r) => r.status === 503).length, 3);
    orch.gate = undefined;
  });

  test("tenants are separate: another org gets its own deployment", async () => {
    const other = identity.caller(ORG2, USER).token;
    const res = await fetch(`${router.url}/v1/sessions/${SESSION}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${other}`, "content-type": "application/json" },
      body: JSON.stringify(hi),
    });
    assert.equal(res.status, 200);
    await res.text();
    assert.ok(await orch.getDeployment("runtime-t-9f8e7d6c"));
    assert.equal(agents.calls.at(-1)?.headers["x-tenant-id"], ORG2);
  });
});
