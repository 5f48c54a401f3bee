import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createTestDatabase } from "@platform/db/testing";
import pino from "pino";
import type { AgentsConfig } from "../config.ts";
import type { AgentsDB } from "../db/schema.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { IdentityDouble } from "../testing/identity-double.ts";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";
import { type AgentsServer, createAgentsServer } from "./create.ts";

// The agents service over HTTP as users see it: REST paths, statuses, the
// error envelope, SSE framing and headers, health endpoints.

let service: AgentsServer;
let base: string;
let database: Awaited<ReturnType<typeof createTestDatabase<AgentsDB>>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const scripted = new ScriptedModel();

before(async () => {
  database = await createTestDatabase<AgentsDB>();
  const config: AgentsConfig = {
    port: 0,
    host: "127.0.0.1",
    dataDir: "",
    identityGrpcUrl: await identity.start(),
    computeGrpcUrl: await compute.start(),
    toolTimeoutMs: 5000,
    toolOutputLimitBytes: 16384,
    maxModelCalls: 10,
    maxTokens: 1024,
    runLeaseMs: 5000,
    logLevel: "silent",
  };
  const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
  service = await createAgentsServer(config, pino({ level: "silent" }), { providers, database, pollMs: 200 });
  base = (await service.listen()).url;
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

type Json = Record<string, any>;

async function call(method: string, path: string, opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined || opts.raw !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, { method, headers, body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: (text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined) as Json };
}

function assertError(res: { status: number; json: Json }, status: number, code: string) {
  assert.equal(res.status, status, JSON.stringify(res.json));
  assert.equal(res.json.error.code, code);
  assert.equal(typeof res.json.error.message, "string");
}

type Frame = { id?: string; data: Json };
function parseSse(text: string): Frame[] {
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((l) => l.startsWith("data:")))
    .map((block) => {
      const lines = block.split("\n");
      const id = lines.find((l) => l.startsWith("id:"))?.slice(3).trim();
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      return { id, data: JSON.parse(data) };
    });
}

async function agentAndSession(model = "dev/echo") {
  const caller = identity.caller();
  const agent = await call("POST", "/v1/agents", { token: caller.token, body: { name: "A", slug: `a-${Math.random()}`, model } });
  const session = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: agent.json.id } });
  return { caller, agent: agent.json, session: session.json };
}

describe("health", () => {
  test("/livez and /healthz are 200 without a token; /readyz follows identity", async () => {
    assert.equal((await fetch(`${base}/livez`)).status, 200);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    await identity.stop();
    try {
      assert.equal((await fetch(`${base}/readyz`)).status, 503);
      assert.equal((await fetch(`${base}/livez`)).status, 200);
    } finally {
      // The double comes back on a new port; point nothing else at it.
      await identity.start();
    }
  });
});
