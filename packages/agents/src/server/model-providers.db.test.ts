import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import { type AgentsConfig, loadConfig } from "../config.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { createAgentsTestDatabase } from "../testing/database.ts";

// An agent whose model no configured provider serves is refused when it is
// created or changed (400 invalid_argument naming the setting to set), not
// at its first message (issue 16 item 3). The models are the service's own,
// from its configuration: the dev model always, the others by their settings.

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON
type Json = Record<string, any>;

describe("models at agent creation (the service's configured providers)", () => {
  const identity = new IdentityDouble();
  const compute = new ComputeDouble();
  let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
  const services: AgentsServer[] = [];

  async function start(env: Record<string, string>): Promise<string> {
    const config: AgentsConfig = loadConfig({
      IDENTITY_GRPC_URL: identity.url,
      COMPUTE_GRPC_URL: compute.url,
      AGENTS_PORT: "0",
      AGENTS_GRPC_PORT: "0",
      LOG_LEVEL: "silent",
      ...env,
    });
    const service = await createAgentsServer(config, pino({ level: "silent" }), {
      database,
      pollMs: 200,
      internalTls: undefined,
    });
    services.push(service);
    return (await service.listen()).url;
  }

  before(async () => {
    database = await createAgentsTestDatabase();
    await identity.start();
    await compute.start();
  });
  after(async () => {
    for (const s of services) await s.close();
    await identity.stop();
    await compute.stop();
    await database?.close();
  });

  async function call(base: string, method: string, path: string, token: string, body: unknown) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  }

  test("without ANTHROPIC_API_KEY or OPENAI_BASE_URL: anthropic/ and openai/ agents are refused naming the setting; dev/ works", async () => {
    const base = await start({});
    const { token } = identity.caller();
    const create = (model: string) =>
      call(base, "POST", "/v1/agents", token, { name: "A", slug: `a-${Math.random()}`, model });

    const anthropic = await create("anthropic/claude-sonnet-4-5");
    assert.equal(anthropic.status, 400);
    assert.deepEqual(anthropic.json, {
      error: {
        code: "invalid_argument",
        message:
          'model "anthropic/claude-sonnet-4-5": the anthropic provider is not configured; set ANTHROPIC_API_KEY on the agents service',
      },
    });
    const openai = await create("openai/gpt-4o");
    assert.equal(openai.status, 400);
    assert.match(openai.json.error.message, /the openai provider is not configured; set OPENAI_BASE_URL/);
    for (const model of ["mystery/x", "no-slash", "dev/"]) {
      const r = await create(model);
      assert.equal(r.status, 400, model);
      assert.match(
        r.json.error.message,
        /must be "<provider>\/<name>" with a provider of dev\/, anthropic\/, openai\//,
        model,
      );
    }

    const dev = await create("dev/echo");
    assert.equal(dev.status, 201, JSON.stringify(dev.json));
    // Changing the model is held to the same rule; other changes are not.
    const patch = await call(base, "PATCH", `/v1/agents/${dev.json.id}`, token, {
      model: "anthropic/claude-sonnet-4-5",
    });
    assert.equal(patch.status, 400);
    assert.match(patch.json.error.message, /set ANTHROPIC_API_KEY/);
    const rename = await call(base, "PATCH", `/v1/agents/${dev.json.id}`, token, { name: "renamed" });
    assert.equal(rename.status, 200, JSON.stringify(rename.json));
    assert.equal(rename.json.model, "dev/echo");
  });

  test("with ANTHROPIC_API_KEY set, anthropic/ agents are created (no call to Anthropic is made)", async () => {
    const base = await start({ ANTHROPIC_API_KEY: "sk-ant-test-not-used", ANTHROPIC_BASE_URL: "http://127.0.0.1:9" });
    const { token } = identity.caller();
    const r = await call(base, "POST", "/v1/agents", token, {
      name: "A",
      slug: "claude",
      model: "anthropic/claude-sonnet-4-5",
    });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.json.model, "anthropic/claude-sonnet-4-5");
  });
});
