// test-timeout: 600000
// API key scopes (issue 19 item 4) through the real identity and agents
// servers: identity puts a key's scopes in VerifyToken, agents refuses an
// RPC the key has no scope for (403 / PERMISSION_DENIED, insufficient_scope),
// identity does the same on its own routes, the router's invoke takes a key
// with sessions:run and refuses one without it (403 insufficient_scope, before
// any worker is woken), and a person's JWT is unaffected. Every agents REST
// route and every identity route a key may call is refused to a key holding
// every scope but the one it needs.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { AgentService } from "@platform/gen/agents/v1/agents_pb";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { type Stack, startStack } from "./hostile/stack.ts";

let stack: Stack;
let jwt: string;

before(async () => {
  stack = await startStack({ compute: false });
  jwt = (await stack.identity.login()).access_token;
});
after(() => stack?.close());

async function newKey(scopes?: string[]): Promise<string> {
  const r = await stack.identity.call("POST", "/v1/users/me/api_keys", {
    token: jwt,
    idem: randomUUID(),
    body: { name: "k", ...(scopes && { scopes }) },
  });
  assert.equal(r.status, 201, r.text);
  assert.deepEqual(r.json.scopes, scopes ?? ["read", "agents:write", "sessions:run"]);
  return r.json.raw_key;
}

async function agents(method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${stack.agentsUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
}

const newAgent = (token: string) =>
  agents("POST", "/v1/agents", token, {
    name: "A",
    slug: `a-${Math.random().toString(36).slice(2)}`,
    model: "dev/echo",
  });

function assertScopeRefused(r: { status: number; text: string; json: { error?: { code: string; reason?: string } } }) {
  assert.equal(r.status, 403, r.text);
  assert.equal(r.json.error?.code, "permission_denied");
  assert.equal(r.json.error?.reason, "insufficient_scope");
}

describe("agents", () => {
  test("a read-only key lists agents but cannot create one (REST and gRPC)", async () => {
    const key = await newKey(["read"]);
    assert.equal((await agents("GET", "/v1/agents", key)).status, 200);
    assertScopeRefused(await newAgent(key));
    const client = createClient(AgentService, stack.transport(stack.agentsGrpcUrl, true));
    const err = await client
      .createAgent({ name: "A", slug: "grpc-a", model: "dev/echo" }, { headers: { authorization: `Bearer ${key}` } })
      .then(
        () => assert.fail("created"),
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(err.code, Code.PermissionDenied);
    assert.equal(err.findDetails(ErrorInfoSchema)[0]?.reason, "insufficient_scope");
  });

  test("sessions:run runs sessions and nothing else; agents:write writes agents only", async () => {
    const full = await newKey();
    const agent = (await newAgent(full)).json;
    const runner = await newKey(["sessions:run"]);
    const session = await agents("POST", "/v1/sessions", runner, { agentId: agent.id });
    assert.equal(session.status, 201, session.text);
    assertScopeRefused(await agents("GET", `/v1/sessions/${session.json.id}`, runner));
    assertScopeRefused(await newAgent(runner));
    assert.equal((await agents("DELETE", `/v1/sessions/${session.json.id}`, runner)).status, 204);

    const writer = await newKey(["agents:write"]);
    assert.equal((await newAgent(writer)).status, 201);
    assertScopeRefused(await agents("POST", "/v1/sessions", writer, { agentId: agent.id }));
  });

  test("a key created without scopes (what every old key migrates to) does everything; a JWT is unaffected", async () => {
    const full = await newKey();
    const agent = await newAgent(full);
    assert.equal(agent.status, 201, agent.text);
    const session = await agents("POST", "/v1/sessions", full, { agentId: agent.json.id });
    assert.equal(session.status, 201, session.text);
    assert.equal((await agents("GET", `/v1/sessions/${session.json.id}`, full)).status, 200);
    assert.equal((await newAgent(jwt)).status, 201);
  });
});

const ALL = ["read", "agents:write", "sessions:run", "admin"];
const without = (scope: string) => ALL.filter((s) => s !== scope);

describe("every route", () => {
  test("each agents REST route refuses a key with every scope but the one it needs (403 insufficient_scope)", async () => {
    const agent = (await newAgent(jwt)).json;
    const session = (await agents("POST", "/v1/sessions", jwt, { agentId: agent.id })).json;
    const routes: Array<[string, string, string, unknown?]> = [
      ["agents:write", "POST", "/v1/agents", { name: "A", slug: "never-made", model: "dev/echo" }],
      ["read", "GET", "/v1/agents"],
      ["read", "GET", `/v1/agents/${agent.id}`],
      ["agents:write", "PATCH", `/v1/agents/${agent.id}`, { name: "B" }],
      ["agents:write", "DELETE", `/v1/agents/${agent.id}`],
      ["sessions:run", "POST", "/v1/sessions", { agentId: agent.id }],
      ["read", "GET", "/v1/sessions"],
      ["read", "GET", `/v1/agents/${agent.id}/sessions`],
      ["read", "GET", `/v1/sessions/${session.id}`],
      ["sessions:run", "POST", `/v1/sessions/${session.id}/messages`, { messages: [{ role: "user", content: "hi" }] }],
      ["read", "GET", `/v1/sessions/${session.id}/events`],
      ["sessions:run", "POST", `/v1/sessions/${session.id}/cancel`],
      ["sessions:run", "DELETE", `/v1/sessions/${session.id}`],
    ];
    const keys = new Map<string, string>();
    for (const scope of new Set(routes.map((r) => r[0]))) keys.set(scope, await newKey(without(scope)));
    for (const [scope, method, path, body] of routes) {
      const r = await agents(method, path, keys.get(scope)!, body);
      assert.equal(r.status, 403, `${method} ${path} without ${scope}: ${r.text}`);
      assert.equal(r.json.error?.reason, "insufficient_scope", `${method} ${path}`);
    }
    // Nothing was changed by a refused call.
    assert.equal((await agents("GET", `/v1/agents/${agent.id}`, jwt)).json.name, "A");
  });

  test("each identity route a key may call refuses a key without read", async () => {
    const orgId = JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()).org_id;
    const key = await newKey(without("read"));
    for (const path of ["/v1/users/me", "/v1/users/me/api_keys", "/v1/users/me/orgs", `/v1/orgs/${orgId}`]) {
      const r = await stack.identity.call("GET", path, { token: key });
      assert.equal(r.status, 403, `${path}: ${r.text}`);
      assert.equal(r.json.code, "insufficient_scope", path);
    }
  });
});

describe("identity", () => {
  test("its own routes need read from a key; an unknown scope is invalid_request", async () => {
    assert.equal((await stack.identity.call("GET", "/v1/users/me", { token: await newKey(["read"]) })).status, 200);
    const refused = await stack.identity.call("GET", "/v1/users/me", { token: await newKey(["sessions:run"]) });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.code, "insufficient_scope");
    const bad = await stack.identity.call("POST", "/v1/users/me/api_keys", {
      token: jwt,
      idem: randomUUID(),
      body: { name: "k", scopes: ["read", "everything"] },
    });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.code, "invalid_request");
  });
});

describe("router", () => {
  const invoke = async (token: string, sessionId: string) => {
    const res = await fetch(`${stack.router.url}/v1/sessions/${sessionId}/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hello router" }] }),
    });
    const text = await res.text();
    return {
      status: res.status,
      text,
      json: res.headers.get("content-type")?.includes("json") && text ? JSON.parse(text) : undefined,
    };
  };
  const newSession = async () => {
    const agent = await newAgent(jwt);
    assert.equal(agent.status, 201, agent.text);
    const session = await agents("POST", "/v1/sessions", jwt, { agentId: agent.json.id });
    assert.equal(session.status, 201, session.text);
    return session.json.id as string;
  };

  test("a key without sessions:run is 403 insufficient_scope in the runtime envelope, and wakes no worker", async () => {
    const sessionId = await newSession();
    const before_ = (await stack.orchestrator.listDeployments({})).length;
    for (const scopes of [["read"], ["read", "agents:write", "admin"]]) {
      const r = await invoke(await newKey(scopes), sessionId);
      assertScopeRefused(r);
      assert.match(r.json.error.message, /sessions:run/);
    }
    assert.equal((await stack.orchestrator.listDeployments({})).length, before_);
  });

  test("a key with sessions:run invokes; a bad key is 401; a JWT is unaffected", async () => {
    const sessionId = await newSession();
    const ok = await invoke(await newKey(["sessions:run"]), sessionId);
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /turn_done|turnDone/, ok.text);
    const revoked = await newKey(["sessions:run"]);
    const keys = await stack.identity.call("GET", "/v1/users/me/api_keys", { token: jwt });
    const id = keys.json.find((k: { key_prefix: string }) => revoked.startsWith(k.key_prefix)).id;
    assert.equal(
      (await stack.identity.call("POST", `/v1/users/me/api_keys/${id}/revoke`, { token: jwt, idem: randomUUID() }))
        .status,
      204,
    );
    const bad = await invoke(revoked, sessionId);
    assert.equal(bad.status, 401, bad.text);
    assert.equal(bad.json.error.code, "unauthenticated");
    const person = await invoke(jwt, sessionId);
    assert.equal(person.status, 200, person.text);
  });

  test("an organization key (no user) runs sessions through agents and the router with sessions:run", async () => {
    const r = await stack.identity.call("POST", "/v1/users/me/api_keys", {
      token: jwt,
      idem: randomUUID(),
      body: { name: "org", org: true, scopes: ["read", "sessions:run"] },
    });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.json.org, true);
    const agent = await newAgent(jwt);
    const session = await agents("POST", "/v1/sessions", r.json.raw_key, { agentId: agent.json.id });
    assert.equal(session.status, 201, session.text);
    const ok = await invoke(r.json.raw_key, session.json.id);
    assert.equal(ok.status, 200, ok.text);
    assertScopeRefused(await newAgent(r.json.raw_key));
  });
});
