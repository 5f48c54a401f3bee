// test-timeout: 600000
// The HTTP edges of every public port, on real servers (identity, agents and
// the router with its tenant worker, in this process): a method the path does
// not take, a body over the limit and a body that is not JSON answer the same
// status and the same code on all three, each in its own envelope; the router
// refuses a session that does not exist with a 404 before any stream, and
// sends its SSE headers as soon as the call is accepted, not with the first
// text (issue 16 item 3).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { DevModel } from "../../../agents/src/providers/dev.ts";
import { ProviderRegistry } from "../../../agents/src/providers/registry.ts";
import { gate, ScriptedModel } from "../../../agents/src/testing/scripted-model.ts";
import { type Stack, startStack } from "./hostile/stack.ts";

interface Port {
  name: "identity" | "agents" | "router";
  base: string;
  /** A path the service serves, and a method it does not take there. */
  path: string;
  wrongMethod: string;
  allow: string;
  /** The envelope's code field. */
  code(body: unknown): string | undefined;
}

describe("HTTP edges on every public port (real identity, agents and router)", { timeout: 170_000 }, () => {
  let stack: Stack;
  let ports: Port[];
  let auth: Record<string, string>;
  const model = new ScriptedModel();

  before(async () => {
    stack = await startStack({
      compute: false,
      providers: new ProviderRegistry().register("dev", new DevModel()).register("scripted", model),
    });
    const login = await stack.identity.login();
    auth = { authorization: `Bearer ${login.access_token}` };
    const envelopeCode = (b: unknown) => (b as { error?: { code?: string } }).error?.code;
    ports = [
      {
        name: "identity",
        base: stack.identity.base,
        path: "/v1/auth/login",
        wrongMethod: "PUT",
        allow: "POST",
        code: (b) => (b as { code?: string }).code,
      },
      {
        name: "agents",
        base: stack.agentsUrl,
        path: "/v1/agents",
        wrongMethod: "PUT",
        allow: "GET, POST",
        code: envelopeCode,
      },
      {
        name: "router",
        base: stack.router.url,
        path: `/v1/sessions/${randomUUID()}/invoke`,
        wrongMethod: "GET",
        allow: "POST",
        code: envelopeCode,
      },
    ];
  });
  after(() => stack?.close());

  async function answer(res: Response) {
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: JSON.parse(text) as unknown };
  }

  const cases = [
    {
      what: "a method the path does not take",
      status: 405,
      code: "method_not_allowed",
      send: (p: Port) => fetch(p.base + p.path, { method: p.wrongMethod, headers: auth }),
    },
    {
      what: "a body over the 1 MiB limit",
      status: 413,
      code: "payload_too_large",
      send: (p: Port) =>
        fetch(p.base + p.path, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ name: "x".repeat(1_100_000) }),
        }),
    },
    {
      what: "a body that is not application/json",
      status: 415,
      code: "unsupported_media_type",
      send: (p: Port) =>
        fetch(p.base + p.path, { method: "POST", headers: { ...auth, "content-type": "text/plain" }, body: "{}" }),
    },
  ];

  for (const c of cases) {
    test(`${c.what}: ${c.status} ${c.code} on every port, in each service's envelope`, async () => {
      for (const p of ports) {
        const r = await answer(await c.send(p));
        assert.equal(r.status, c.status, `${p.name}: ${JSON.stringify(r.body)}`);
        assert.equal(r.headers.get("content-type"), "application/json", p.name);
        assert.equal(p.code(r.body), c.code, `${p.name}: ${JSON.stringify(r.body)}`);
        if (c.status === 405) assert.equal(r.headers.get("allow"), p.allow, p.name);
      }
    });
  }

  test("the router answers 404 for a session that does not exist, before any stream", async () => {
    for (const session of [randomUUID(), randomUUID()]) {
      const res = await fetch(`${stack.router.url}/v1/sessions/${session}/invoke`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hello" }] }),
      });
      const r = await answer(res);
      assert.equal(r.status, 404, JSON.stringify(r.body));
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.deepEqual(r.body, { error: { code: "not_found", message: "session not found" } });
    }
    // Without messages (rejoin) too.
    const rejoin = await answer(
      await fetch(`${stack.router.url}/v1/sessions/${randomUUID()}/invoke`, { method: "POST", headers: auth }),
    );
    assert.equal(rejoin.status, 404, JSON.stringify(rejoin.body));
  });

  test("agents and the router send their SSE headers while the model is still working, before the first text", async () => {
    const agent = await answer(
      await fetch(`${stack.agentsUrl}/v1/agents`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ name: "slow", slug: `slow-${randomUUID()}`, model: "scripted/slow" }),
      }),
    );
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const session = await answer(
      await fetch(`${stack.agentsUrl}/v1/sessions`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ agentId: (agent.body as { id: string }).id }),
      }),
    );
    const sessionId = (session.body as { id: string }).id;
    const surfaces = [
      {
        name: "agents",
        url: `${stack.agentsUrl}/v1/sessions/${sessionId}/messages`,
        text: 'data: {"type":"text","content":"late"}',
      },
      { name: "router", url: `${stack.router.url}/v1/sessions/${sessionId}/invoke`, text: "data: late" },
    ];
    for (const s of surfaces) {
      // The model holds its reply until the test lets it go: nothing but the
      // acceptance of the call can bring the headers before that.
      const held = gate();
      model.push([
        { type: "wait", until: held.promise },
        { type: "text", text: "late" },
      ]);
      const started = performance.now();
      const pending = fetch(s.url, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify({ messages: [{ role: "user", content: "take your time" }] }),
      });
      const timeout = new Promise<"no headers">((resolve) => setTimeout(resolve, 30_000, "no headers").unref());
      const res = await Promise.race([pending, timeout]);
      assert.notEqual(res, "no headers", `${s.name}: no response headers while the model was held`);
      const headersMs = performance.now() - started;
      const opened = res as Response;
      assert.equal(opened.status, 200, s.name);
      assert.equal(opened.headers.get("content-type"), "text/event-stream", s.name);
      held.open();
      const body = await opened.text();
      assert.ok(body.includes(s.text), `${s.name}: ${body}`);
      console.log(
        `${s.name}: headers after ${Math.round(headersMs)} ms with the model held; body ${JSON.stringify(body)}`,
      );
    }
  });
});
