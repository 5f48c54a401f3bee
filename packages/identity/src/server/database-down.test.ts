// Issue 15 item 7 on the real identity service: with its PostgreSQL down
// (a private cluster this test stops; never the shared server), every
// endpoint that needs the database answers 503 `unavailable` with
// Retry-After (REST) or UNAVAILABLE (gRPC), never 500; the process survives
// its connections being cut; and it serves again once the database is back.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { type PrivateCluster, startPrivateCluster } from "@platform/db/testing-pg-cluster";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { createServiceTransport } from "@platform/rpc";
import { type App, startApp } from "../app.ts";
import { loadSettings } from "../config/settings.ts";
import { LogCapture } from "../testing/server.ts";

const OWNER = { email: "owner@example.com", password: "owner-password-1" };
let cluster: PrivateCluster;
let app: App;
const logs = new LogCapture();

before(async () => {
  cluster = await startPrivateCluster();
  const settings = loadSettings({
    IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
    DATABASE_URL: await cluster.database("identity"),
    HOST: "127.0.0.1",
    SERVER_PORT: "0",
    IDENTITY_GRPC_PORT: "0",
    LOG_LEVEL: "info",
    ARGON2_MEMORY_KIB: "1024",
    ARGON2_TIME_COST: "1",
    BOOTSTRAP_OWNER_EMAIL: OWNER.email,
    BOOTSTRAP_OWNER_PASSWORD: OWNER.password,
    BOOTSTRAP_ORG_NAME: "Acme Inc",
  });
  // Not about internal traffic: the internal port in plaintext.
  app = await startApp(settings, { logDestination: logs, internalTls: undefined });
});
after(async () => {
  await app?.close().catch(() => {});
  cluster?.destroy();
});

async function call(
  method: string,
  path: string,
  init: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...init.headers };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  const res = await fetch(app.urls.rest + path, {
    method,
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get("retry-after"),
    text,
    json: text ? JSON.parse(text) : undefined,
  };
}

test("the database down: 503 unavailable + Retry-After on REST, UNAVAILABLE on gRPC, never 500; served again when it is back", async () => {
  const login = await call("POST", "/v1/auth/login", { body: OWNER });
  assert.equal(login.status, 200, login.text);
  const token: string = login.json.access_token;
  const apiKey = await call("POST", "/v1/users/me/api_keys", {
    token,
    body: { name: "outage" },
    headers: { "idempotency-key": "outage-key-1" },
  });
  assert.equal(apiKey.status, 201, apiKey.text);
  const grpc = createClient(AuthService, createServiceTransport({ baseUrl: app.urls.grpc, tls: undefined }));

  cluster.stop("immediate");
  const seen: string[] = [];
  const requests = [
    () => call("POST", "/v1/auth/login", { body: OWNER }),
    () => call("GET", "/v1/users/me", { token }),
    () => call("POST", "/v1/auth/refresh", { body: { refresh_token: login.json.refresh_token } }),
  ];
  for (const request of requests) {
    const started = performance.now();
    const r = await request();
    const ms = performance.now() - started;
    seen.push(`${r.status} ${r.json?.code} retry-after=${r.retryAfter} ${ms.toFixed(0)} ms`);
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.code, "unavailable");
    assert.equal(r.retryAfter, "5");
    // Answered at once, not after the pool's or the request's timeout.
    assert.ok(ms < 5000, `${ms.toFixed(0)} ms`);
  }
  const readyz = await fetch(`${app.urls.rest}/readyz`);
  assert.equal(readyz.status, 503);
  // An API key needs its row: UNAVAILABLE, not INTERNAL, for the agents service asking.
  await assert.rejects(grpc.verifyToken({ token: apiKey.json.raw_key }), (err: unknown) => {
    const ce = ConnectError.from(err);
    assert.equal(ce.code, Code.Unavailable, String(err));
    assert.equal(ce.metadata.get("retry-after"), "5");
    return true;
  });
  console.log(`while the database was down: ${seen.join("; ")}`);
  // Nothing was logged as a bug of ours.
  assert.ok(
    !logs.lines.some((l) => /"status":500|unhandled error/.test(l)),
    logs.lines.filter((l) => /500|unhandled/.test(l)).join("\n"),
  );

  cluster.start();
  const back = performance.now();
  for (;;) {
    const r = await call("POST", "/v1/auth/login", { body: OWNER });
    if (r.status === 200) break;
    assert.equal(r.status, 503, r.text);
    assert.ok(performance.now() - back < 20_000, "not served again 20 s after the database came back");
    await sleep(200);
  }
  console.log(`served again ${(performance.now() - back).toFixed(0)} ms after the database was started`);
  assert.equal((await call("GET", "/v1/users/me", { token })).status, 200);
});
