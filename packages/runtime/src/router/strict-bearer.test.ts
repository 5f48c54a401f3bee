// Issue 14 item 4 at the router: only `Authorization: Bearer <JWT>` with the
// exact compact JWS passes; every loose variant of a genuine token is 401 and
// never reaches identity's VerifyJWT or wakes a worker.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { acceptedHeaders, looseHeaderVariants, rawRequest } from "@platform/credentials/testing";
import { AgentsDouble } from "../testing/agents-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { InProcessOrchestrator } from "../testing/in-process-orchestrator.ts";
import { IdentityClient } from "@platform/identity-client";
import { type RunningRouter, startRouter } from "./router.ts";

const ORG = "0a1b2c3d-0000-4000-8000-000000000011";
const USER = "11111111-0000-4000-8000-000000000012";
const SESSION = "5e551000-0000-4000-8000-000000000013";

const identity = new IdentityDouble();
const agents = new AgentsDouble();
let router: RunningRouter;
let token: string;

before(async () => {
  await identity.start();
  await agents.start();
  token = identity.caller(ORG, USER).token;
  agents.script = () => [{ type: "text", content: "hello" }, { type: "done" }];
  router = await startRouter({
    auth: new IdentityClient(createGrpcTransport({ baseUrl: identity.url })),
    orchestrator: new InProcessOrchestrator(agents.url),
    sweeps: false,
  });
});
after(async () => {
  await router.close();
  await agents.close();
  await identity.stop();
});

const invoke = (authorization: string) =>
  rawRequest(router.url, {
    method: "POST",
    path: `/v1/sessions/${SESSION}/invoke`,
    authorization,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
  });

test("the exact header is accepted, with the scheme in any case", async () => {
  for (const authorization of acceptedHeaders(token)) {
    const r = await invoke(authorization);
    assert.equal(r.status, 200, `${router.url} ${authorization.slice(0, 8)}: ${r.body.slice(0, 200)}`);
  }
});

test("every loose variant of a genuine JWT is 401 without asking identity (400 from HTTP itself for CR/LF/NUL)", async () => {
  for (const v of looseHeaderVariants(token)) {
    const before_ = identity.verifyCalls;
    const r = await invoke(v.value);
    const what = `${v.what} → ${r.status} ${r.body.slice(0, 120)}`;
    if (v.http === "same") {
      assert.equal(r.status, 200, what);
      continue;
    }
    assert.equal(r.status, v.http === "refused-by-http" ? 400 : 401, what);
    assert.equal(identity.verifyCalls, before_, `${what}: reached identity`);
  }
});
