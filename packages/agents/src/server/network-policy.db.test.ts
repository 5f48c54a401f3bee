// Issue 21 in the agents service (real server, REST + SSE, dev model,
// compute double): an agent's network_policy is validated (entries named),
// stored, returned, replaced and cleared; its sessions' sandboxes are
// created with it; a connection the sandbox's egress proxy refused during a
// tool call appears in the session's log as `network_denied`
// {sandboxId, host, port, reason}, streamed and stored, never given to the model.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { jsonCall, jsonOk, type ServerHarness, startServerHarness } from "../testing/harness.ts";

let h: ServerHarness;
let auth: Record<string, string>;

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

before(async () => {
  h = await startServerHarness({
    providers: new ProviderRegistry().register("dev", new DevModel()),
    config: { toolTimeoutMs: 30_000 },
  });
  auth = { authorization: `Bearer ${h.identity.caller().token}`, "content-type": "application/json" };
});
after(async () => {
  await h?.close();
});

const call = (method: string, path: string, body?: unknown) => jsonCall(h.base, auth, method, path, body);
const json = (method: string, path: string, body?: unknown) => jsonOk(h.base, auth, method, path, body);

async function send(session: string, content: string): Promise<Json[]> {
  const res = await fetch(`${h.base}/v1/sessions/${session}/messages`, {
    method: "POST",
    headers: { ...auth, accept: "text/event-stream" },
    body: JSON.stringify({ messages: [{ role: "user", content }] }),
  });
  assert.equal(res.status, 200);
  const frames = (await res.text())
    .split("\n\n")
    .map((b) => b.split("\n").find((l) => l.startsWith("data:")))
    .filter((l): l is string => !!l)
    .map((l) => JSON.parse(l.slice(5)) as Json);
  assert.equal(frames.at(-1)?.type, "done", JSON.stringify(frames));
  return frames;
}

test("an agent's network policy is validated, stored, returned, replaced and cleared", async () => {
  const bad = await call("POST", "/v1/agents", {
    name: "N",
    slug: "n-bad",
    model: "dev/echo",
    networkPolicy: { allowedDomains: ["pypi.org", "not a domain"] },
  });
  assert.equal(bad.status, 400);
  assert.match(JSON.stringify(bad.body), /allowed_domains\[1\]/);
  const badCidr = await call("POST", "/v1/agents", {
    name: "N",
    slug: "n-bad2",
    model: "dev/echo",
    networkPolicy: { allowedCidrs: [{ cidr: "10.0.0.0/40" }] },
  });
  assert.equal(badCidr.status, 400);
  assert.match(JSON.stringify(badCidr.body), /allowed_cidrs\[0\]/);

  const created = await json("POST", "/v1/agents", {
    name: "N",
    slug: "n-policy",
    model: "dev/echo",
    networkPolicy: {
      allowedDomains: ["PyPI.org", "*.pythonhosted.org"],
      allowedCidrs: [{ cidr: "203.0.113.0/24", ports: [443] }],
    },
  });
  assert.deepEqual(created.networkPolicy.allowedDomains, ["pypi.org", "*.pythonhosted.org"]);
  assert.deepEqual(created.networkPolicy.allowedCidrs, [{ cidr: "203.0.113.0/24", ports: [443] }]);
  const got = (await json("GET", `/v1/agents/${created.id}`)).agent ?? (await json("GET", `/v1/agents/${created.id}`));
  assert.deepEqual(got.networkPolicy.allowedDomains, ["pypi.org", "*.pythonhosted.org"]);

  const renamed = await json("PATCH", `/v1/agents/${created.id}`, { name: "N2" });
  assert.deepEqual(renamed.networkPolicy?.allowedDomains, ["pypi.org", "*.pythonhosted.org"], "absent: unchanged");
  const replaced = await json("PATCH", `/v1/agents/${created.id}`, { networkPolicy: { allowAll: true } });
  assert.equal(replaced.networkPolicy.allowAll, true);
  assert.deepEqual(replaced.networkPolicy.allowedDomains ?? [], []);
  const cleared = await json("PATCH", `/v1/agents/${created.id}`, { networkPolicy: {} });
  assert.equal(cleared.networkPolicy ?? undefined, undefined);
  const plain = await json("POST", "/v1/agents", { name: "P", slug: "p-none", model: "dev/echo" });
  assert.equal(plain.networkPolicy ?? undefined, undefined);
});

test("a session's sandbox gets the agent's policy; a refused connection is a network_denied event", async () => {
  const agent = await json("POST", "/v1/agents", {
    name: "Net",
    slug: "net-denied",
    model: "dev/echo",
    networkPolicy: { allowedDomains: ["pypi.org"] },
  });
  const session = (await json("POST", "/v1/sessions", { agentId: agent.id })).id as string;
  const live = await send(session, "/bash netdeny evil.example 443");
  const sandboxId = (await json("GET", `/v1/sessions/${session}`)).session.sandboxId as string;
  const call = h.compute.createCalls.find((c) => c.sessionId === session);
  assert.deepEqual(call?.networkPolicy?.allowedDomains, ["pypi.org"]);
  const denied = live.filter((f) => f.type === "network_denied");
  assert.equal(denied.length, 1, JSON.stringify(live.map((f) => f.type)));
  assert.deepEqual(JSON.parse(denied[0]?.content), {
    sandboxId,
    host: "evil.example",
    port: 443,
    reason: "not_allowed",
  });
  const types = live.map((f) => f.type);
  assert.ok(types.indexOf("network_denied") < types.indexOf("tool_result"), "told before the call's result");
  // Stored with the session's events; a later call tells only its own refusals.
  const stored = (await json("GET", `/v1/sessions/${session}`)).events as Json[];
  assert.equal(stored.filter((e) => e.type === "network_denied").length, 1);
  const again = await send(session, "/bash echo fine");
  assert.deepEqual(
    again.filter((f) => f.type === "network_denied"),
    [],
  );
  const twice = await send(session, "/bash netdeny other.example 80");
  assert.deepEqual(
    twice.filter((f) => f.type === "network_denied").map((f) => JSON.parse(f.content).host),
    ["other.example"],
  );

  // An agent without a policy: sandboxes without one, and no look at the network log.
  const plain = await json("POST", "/v1/agents", { name: "Q", slug: "q-plain", model: "dev/echo" });
  const s2 = (await json("POST", "/v1/sessions", { agentId: plain.id })).id as string;
  const none = await send(s2, "/bash netdeny evil.example 443");
  assert.deepEqual(
    none.filter((f) => f.type === "network_denied"),
    [],
  );
  assert.equal(h.compute.createCalls.find((c) => c.sessionId === s2)?.networkPolicy, undefined);
});
