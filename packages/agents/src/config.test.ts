import assert from "node:assert/strict";
import { test } from "node:test";
import { ConfigError, loadConfig } from "./config.ts";

const base = { IDENTITY_GRPC_URL: "http://127.0.0.1:50051", COMPUTE_GRPC_URL: "http://127.0.0.1:50052" };

test("defaults: port 8082, PGlite, dev model only", () => {
  const c = loadConfig(base);
  assert.equal(c.port, 8082);
  assert.equal(c.grpcPort, 50053);
  assert.equal(c.databaseUrl, undefined);
  assert.equal(c.anthropic, undefined);
  assert.equal(c.openai, undefined);
  assert.equal(c.toolOutputLimitBytes, 16384);
});

test("a missing or invalid setting is named", () => {
  assert.throws(
    () => loadConfig({ COMPUTE_GRPC_URL: base.COMPUTE_GRPC_URL }),
    (e: unknown) => e instanceof ConfigError && /IDENTITY_GRPC_URL/.test(e.message),
  );
  assert.throws(() => loadConfig({ IDENTITY_GRPC_URL: base.IDENTITY_GRPC_URL }), /COMPUTE_GRPC_URL/);
  assert.throws(() => loadConfig({ ...base, AGENTS_PORT: "http" }), /AGENTS_PORT/);
  assert.throws(() => loadConfig({ ...base, AGENTS_GRPC_PORT: "70000" }), /AGENTS_GRPC_PORT/);
  assert.throws(() => loadConfig({ ...base, OPENAI_BASE_URL: "not a url" }), /OPENAI_BASE_URL/);
  assert.throws(() => loadConfig({ ...base, LOG_LEVEL: "loud" }), /LOG_LEVEL/);
});

test("providers are configured by their env vars; the OpenAI key is optional", () => {
  const c = loadConfig({ ...base, ANTHROPIC_API_KEY: "sk-ant", OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" });
  assert.deepEqual(c.anthropic, { apiKey: "sk-ant", baseUrl: undefined });
  assert.deepEqual(c.openai, { baseUrl: "http://127.0.0.1:11434/v1", apiKey: undefined });
});

test("AGENTS_SANDBOX_IDLE_MS: 15 minutes by default, 0 keeps sandboxes, anything else invalid is named", () => {
  assert.equal(loadConfig(base).sandboxIdleMs, 15 * 60_000);
  assert.equal(loadConfig({ ...base, AGENTS_SANDBOX_IDLE_MS: "0" }).sandboxIdleMs, 0);
  assert.equal(loadConfig({ ...base, AGENTS_SANDBOX_IDLE_MS: "60000" }).sandboxIdleMs, 60_000);
  assert.throws(() => loadConfig({ ...base, AGENTS_SANDBOX_IDLE_MS: "soon" }), /AGENTS_SANDBOX_IDLE_MS/);
  assert.throws(() => loadConfig({ ...base, AGENTS_SANDBOX_IDLE_MS: "-1" }), /AGENTS_SANDBOX_IDLE_MS/);
});
