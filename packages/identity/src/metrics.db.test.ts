// Issue 24 item 2 on the real identity service: both ports serve /metrics
// with METRICS_TOKEN, logins move the request counters under their route
// template, and the password-hash gauges are there.
import assert from "node:assert/strict";
import https from "node:https";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { labelValues, parsePrometheusText, sampleSum, scrapeMetrics } from "@platform/rpc/testing/prometheus-text";
import { startTestServer, type TestServer } from "./testing/server.ts";

const TOKEN = "identity-metrics-token-0123456789abcdef";
let s: TestServer;
before(async () => {
  s = await startTestServer({ METRICS_TOKEN: TOKEN });
});
after(() => s?.close());

/** GET /metrics on the internal port: mutual TLS with the operator's certificate. */
function scrapeInternal(): Promise<string> {
  const tls = s.tls("operator");
  return new Promise((resolve, reject) => {
    const req = https.get(
      `${s.grpcUrl}/metrics`,
      { ca: tls.ca, cert: tls.cert, key: tls.key, headers: { authorization: `Bearer ${TOKEN}` } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${res.statusCode} ${body}`))));
      },
    );
    req.on("error", reject);
  });
}

test("logins and reads are counted by route template and status; the hash gauges are exposed", async () => {
  const before = await scrapeMetrics(`${s.base}/metrics`, TOKEN);
  const pair = await s.login();
  await s.login();
  const bad = await s.call("POST", "/v1/auth/login", { body: { email: "owner@example.com", password: "wrong-pass" } });
  assert.equal(bad.status, 401);
  const orgs = await s.call("GET", "/v1/users/me/orgs", { token: pair.access_token });
  const orgId = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/.exec(orgs.text)?.[0];
  assert.ok(orgId, orgs.text);
  assert.equal((await s.call("GET", `/v1/orgs/${orgId}`, { token: pair.access_token })).status, 200);
  const grpc = createClient(AuthService, s.grpcTransport("agents"));
  await grpc.verifyToken({ token: `Bearer ${pair.access_token}` });

  const fams = await scrapeMetrics(`${s.base}/metrics`, TOKEN);
  const delta = (name: string, labels: Record<string, string>) =>
    sampleSum(fams, name, labels) - sampleSum(before, name, labels);
  const login = { server: "identity", method: "POST", route: "/v1/auth/login" };
  assert.equal(delta("platform_http_requests_total", { ...login, code: "200" }), 2);
  assert.equal(delta("platform_http_requests_total", { ...login, code: "401" }), 1);
  assert.equal(delta("platform_http_requests_total", { server: "identity", route: "/v1/orgs/{id}", code: "200" }), 1);
  // The internal listener records into the same registry.
  assert.equal(
    delta("platform_rpc_server_handled_total", {
      server: "identity-grpc",
      service: "identity.v1.AuthService",
      method: "VerifyToken",
      code: "OK",
    }),
    1,
  );
  const routes = labelValues(fams, "platform_http_requests_total", "route");
  assert.ok(![...routes].some((r) => r.includes(orgId)), [...routes].join(" "));

  // argon2's queue, at rest now, and the hashes the logins ran.
  assert.equal(sampleSum(fams, "platform_identity_password_hash_queue_depth"), 0);
  assert.equal(sampleSum(fams, "platform_identity_password_hash_queue_limit"), 32);
  assert.ok(sampleSum(fams, "platform_identity_password_hash_slots") >= 1);
  assert.ok(sampleSum(fams, "platform_identity_password_hash_peak_concurrent") >= 1);
  assert.ok(sampleSum(fams, "platform_identity_password_hash_recent_seconds") > 0);
  assert.equal(fams.get("platform_identity_password_hash_queue_depth")?.type, "gauge");

  // The internal port serves the same registry, to a certificate of the CA with the token.
  const internal = parsePrometheusText(await scrapeInternal());
  assert.ok(sampleSum(internal, "platform_http_requests_total", login) >= 3);
});

test("/metrics refuses a missing or wrong token", async () => {
  for (const token of [undefined, "identity-metrics-token-wrong-0123456789"]) {
    const r = await s.call("GET", "/metrics", token ? { token } : {});
    assert.equal(r.status, 401);
    assert.doesNotMatch(r.text, /platform_/);
  }
});
