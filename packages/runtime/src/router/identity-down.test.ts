// Issue 15 item 7 at the router: identity down (stopped after the router
// started) is the caller's 503 `unavailable` with Retry-After, not a 401 (the
// credential was never judged) nor a 500.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { AgentsDouble } from "../testing/agents-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { InProcessOrchestrator } from "../testing/in-process-orchestrator.ts";
import { IdentityClient } from "@platform/identity-client";
import { type RunningRouter, startRouter } from "./router.ts";

const ORG = "0a1b2c3d-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";

let pki: TestPki;
let identity: IdentityDouble;
let agents: AgentsDouble;
let router: RunningRouter;

before(async () => {
  pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker"]);
  const tlsOf = (name: string) => loadServiceTls(pki.env(name));
  identity = new IdentityDouble({ tls: tlsOf("identity") });
  agents = new AgentsDouble(tlsOf("agents"));
  await identity.start();
  await agents.start();
  router = await startRouter({
    auth: new IdentityClient(
      createServiceTransport({ baseUrl: identity.url, tls: tlsOf("runtime-router"), expectServer: "identity" }),
    ),
    orchestrator: new InProcessOrchestrator(agents.url, tlsOf("runtime-worker")),
    sweeps: false,
    tls: tlsOf("runtime-router"),
  });
});
after(async () => {
  await router?.close();
  await agents?.close();
  await identity?.stop().catch(() => {});
  pki?.remove();
});

test("identity down: invoke answers 503 unavailable with Retry-After: 5, not 401 or 500", async () => {
  const token = identity.caller(ORG, USER).token;
  const invoke = () =>
    fetch(`${router.url}/v1/sessions/${SESSION}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
  const up = await invoke();
  assert.equal(up.status, 200, await up.text());
  await up.text().catch(() => {});

  await identity.stop();
  const down = await invoke();
  const body = await down.text();
  assert.equal(down.status, 503, body);
  assert.equal(down.headers.get("retry-after"), "5");
  assert.equal(JSON.parse(body).error.code, "unavailable");
});
