// Issue 19 item 5: a service outside the platform verifies our access tokens
// with a stock library and nothing but identity's public URL: jose's
// createRemoteJWKSet on the key set named by the discovery document, over
// HTTP against the real server.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createRemoteJWKSet, errors, jwtVerify } from "jose";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

test("discovery names the key set; jose's remote JWKS verifies our tokens and refuses a forged one", async () => {
  const conf = await s.call("GET", "/.well-known/openid-configuration");
  assert.equal(conf.status, 200, conf.text);
  assert.equal(conf.json.issuer, "identity.platform");
  assert.equal(conf.json.jwks_uri, `${s.base}/.well-known/jwks.json`);
  assert.deepEqual(conf.json.id_token_signing_alg_values_supported, ["RS256"]);
  assert.match(conf.headers.get("cache-control") ?? "", /max-age=\d+/);

  const set = await s.call("GET", "/.well-known/jwks.json");
  assert.equal(set.status, 200);
  const active = await s.identity.keys.ensureActiveKey();
  assert.deepEqual(
    set.json.keys.map((k: Record<string, string>) => [k.kty, k.kid, k.use, k.alg]),
    [["RSA", active, "sig", "RS256"]],
  );
  assert.ok(!set.text.includes('"d"'), "no private part");

  // The outside verifier: only the discovered URL, the issuer and the audience.
  const jwks = createRemoteJWKSet(new URL(conf.json.jwks_uri));
  const token = (await s.login()).access_token;
  const { payload, protectedHeader } = await jwtVerify(token, jwks, {
    issuer: conf.json.issuer,
    audience: "agents",
    algorithms: ["RS256"],
  });
  assert.equal(protectedHeader.kid, active);
  assert.match(String(payload.sub), /^[0-9a-f-]{36}$/);

  // A token whose payload was altered fails the signature check.
  const [h, p, sig] = token.split(".");
  const claims = JSON.parse(Buffer.from(p!, "base64url").toString());
  const forged = [
    h,
    Buffer.from(JSON.stringify({ ...claims, org_id: "00000000-0000-4000-8000-000000000000" })).toString("base64url"),
    sig,
  ].join(".");
  await assert.rejects(jwtVerify(forged, jwks, { issuer: "identity.platform" }), errors.JWSSignatureVerificationFailed);

  // After a rotation the set names the new key, and a fresh outside verifier accepts tokens it signs.
  const next = await s.identity.keys.rotate();
  const rotated = await s.call("GET", "/.well-known/jwks.json");
  assert.deepEqual(
    rotated.json.keys.map((k: { kid: string }) => k.kid),
    [next],
  );
  const fresh = (await s.login()).access_token;
  await jwtVerify(fresh, createRemoteJWKSet(new URL(conf.json.jwks_uri)), {
    issuer: "identity.platform",
    audience: "agents",
  });
});

test("IDENTITY_PUBLIC_URL is what discovery names; a hostile Host header never makes it into a URL", async () => {
  const behind = await startTestServer({ IDENTITY_PUBLIC_URL: "https://id.example.test/" });
  try {
    const conf = await behind.call("GET", "/.well-known/openid-configuration");
    assert.equal(conf.json.jwks_uri, "https://id.example.test/.well-known/jwks.json");
  } finally {
    await behind.close();
  }
  const { request } = await import("node:http");
  const body = await new Promise<string>((resolve, reject) => {
    const req = request(`${s.base}/.well-known/openid-configuration`, { headers: { host: "evil.test/x?" } }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve(text));
    });
    req.on("error", reject);
    req.end();
  });
  assert.ok(!body.includes("evil.test"), body);
});
