// Issue 22 in the agents service (real server, REST, dev model, compute
// double): an agent's image is checked against compute's images (an unknown
// one is 400 INVALID_ARGUMENT naming the images there are), stored, returned,
// changed and reset; its sessions' sandboxes are created on it.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { jsonCall, jsonOk, type ServerHarness, startServerHarness } from "../testing/harness.ts";

let h: ServerHarness;
let auth: Record<string, string>;

before(async () => {
  h = await startServerHarness({
    providers: new ProviderRegistry().register("dev", new DevModel()),
    config: { toolTimeoutMs: 30_000 },
    prepare: ({ compute }) => {
      compute.images = ["python:3", "node:20"];
    },
  });
  auth = { authorization: `Bearer ${h.identity.caller().token}`, "content-type": "application/json" };
});
after(async () => {
  await h?.close();
});

const call = (method: string, path: string, body?: unknown) => jsonCall(h.base, auth, method, path, body);
const json = (method: string, path: string, body?: unknown) => jsonOk(h.base, auth, method, path, body);

test("an agent's image: unknown refused with the list, stored, changed, reset; its sandboxes run on it", async () => {
  const bad = await call("POST", "/v1/agents", { name: "I", slug: "i-bad", model: "dev/echo", image: "ruby:3" });
  assert.equal(bad.status, 400);
  assert.match(JSON.stringify(bad.body), /unknown image \\"ruby:3\\"; available: python:3, node:20, host/);
  const spaced = await call("POST", "/v1/agents", { name: "I", slug: "i-bad2", model: "dev/echo", image: "a b" });
  assert.equal(spaced.status, 400);

  const agent = await json("POST", "/v1/agents", { name: "I", slug: "i-py", model: "dev/echo", image: "python:3" });
  assert.equal(agent.image, "python:3");
  assert.equal(
    (await json("GET", `/v1/agents/${agent.id}`)).image ?? (await json("GET", `/v1/agents/${agent.id}`)).agent?.image,
    "python:3",
  );
  assert.equal((await json("PATCH", `/v1/agents/${agent.id}`, { name: "I2" })).image, "python:3", "absent: unchanged");
  const badUpdate = await call("PATCH", `/v1/agents/${agent.id}`, { image: "ruby:3" });
  assert.equal(badUpdate.status, 400);

  const session = (await json("POST", "/v1/sessions", { agentId: agent.id })).id as string;
  const res = await fetch(`${h.base}/v1/sessions/${session}/messages`, {
    method: "POST",
    headers: { ...auth, accept: "text/event-stream" },
    body: JSON.stringify({ messages: [{ role: "user", content: "/bash echo hi" }] }),
  });
  assert.equal(res.status, 200);
  await res.text();
  assert.equal(h.compute.createCalls.find((c) => c.sessionId === session)?.image, "python:3");

  assert.equal((await json("PATCH", `/v1/agents/${agent.id}`, { image: "host" })).image, "host");
  const reset = await json("PATCH", `/v1/agents/${agent.id}`, { image: "" });
  assert.equal(reset.image ?? "", "", "empty: compute's default");
  const plain = await json("POST", "/v1/agents", { name: "P", slug: "i-plain", model: "dev/echo" });
  assert.equal(plain.image ?? "", "");
});
