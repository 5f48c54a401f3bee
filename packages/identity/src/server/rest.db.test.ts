// The REST surface through the real server (fetch against its port): every
// row of the specification's identity table with its fields, statuses and
// error codes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { addMembership } from "../users/memberships.ts";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let owner: { access_token: string; refresh_token: string };
let orgId: string;
let ownerId: string;
before(async () => {
  s = await startTestServer();
  owner = await s.login();
  const me = await s.call("GET", "/v1/users/me", { token: owner.access_token });
  ownerId = me.json.id;
  orgId = (
    await s.identity.db
      .selectFrom("memberships")
      .select("org_id")
      .where("user_id", "=", ownerId)
      .executeTakeFirstOrThrow()
  ).org_id;
});
after(() => s.close());

let n = 0;
const idem = () => `idem-${Date.now()}-${n++}`;

async function member(role: "member" | "owner" = "member") {
  const email = `m${n++}-${Date.now()}@example.com`;
  const user = await s.identity.users.create({ email, name: "Member", password: "member-password" });
  await addMembership(s.identity.db, user.id, orgId, role);
  const pair = await s.login(email, "member-password");
  return { id: user.id, email, ...pair };
}

describe("health", () => {
  test("/livez and /readyz answer 200", async () => {
    assert.equal((await s.call("GET", "/livez")).status, 200);
    assert.equal((await s.call("GET", "/readyz")).status, 200);
  });
});

describe("POST /v1/auth/login", () => {
  test("200 token pair with exactly the RFC 6749 fields", async () => {
    const r = await s.call("POST", "/v1/auth/login", {
      body: { email: "OWNER@example.COM", password: "owner-password-1", x_device_label: "cli" },
    });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.json).sort(), ["access_token", "expires_in", "refresh_token", "token_type"]);
    assert.equal(r.json.token_type, "Bearer");
    assert.equal(r.json.expires_in, 3600);
    assert.match(r.json.refresh_token, /^rt_/);
    assert.equal(r.json.access_token.split(".").length, 3);
  });

  test("401 unauthenticated, same body for wrong password and unknown email", async () => {
    const a = await s.call("POST", "/v1/auth/login", { body: { email: "owner@example.com", password: "nope-nope" } });
    const b = await s.call("POST", "/v1/auth/login", { body: { email: "ghost@example.com", password: "nope-nope" } });
    assert.equal(a.status, 401);
    assert.equal(a.json.code, "unauthenticated");
    assert.deepEqual(a.json, b.json);
  });

  test("400 invalid_request for a missing field or a malformed body", async () => {
    for (const init of [
      { body: { email: "owner@example.com" } },
      { body: {} },
      { raw: "{" },
      { raw: "[]" },
      { body: { email: 5, password: "x" } },
    ]) {
      const r = await s.call("POST", "/v1/auth/login", init);
      assert.equal(r.status, 400, JSON.stringify(init));
      assert.equal(r.json.code, "invalid_request");
    }
  });
});

describe("POST /v1/auth/refresh", () => {
  test("200 new pair; reuse 401 refresh_token_reused with action re_authenticate; then invalid", async () => {
    const first = await s.login();
    const r = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: first.refresh_token } });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.json).sort(), ["access_token", "expires_in", "refresh_token", "token_type"]);
    const reuse = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: first.refresh_token } });
    assert.equal(reuse.status, 401);
    assert.equal(reuse.json.code, "refresh_token_reused");
    assert.equal(reuse.json.action, "re_authenticate");
    assert.equal(typeof reuse.json.message, "string");
    const after_ = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: r.json.refresh_token } });
    assert.equal(after_.status, 401);
    assert.equal(after_.json.code, "refresh_token_invalid");
  });

  test("400 refresh_token_required; 401 refresh_token_invalid for unknown", async () => {
    for (const body of [{}, { refresh_token: "" }]) {
      const r = await s.call("POST", "/v1/auth/refresh", { body });
      assert.equal(r.status, 400);
      assert.equal(r.json.code, "refresh_token_required");
    }
    const r = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: "rt_unknown" } });
    assert.equal(r.status, 401);
    assert.equal(r.json.code, "refresh_token_invalid");
  });
});

describe("POST /v1/auth/logout", () => {
  test("always 204 with no body; the token's family is revoked", async () => {
    const pair = await s.login();
    for (const body of [
      { refresh_token: pair.refresh_token },
      { refresh_token: pair.refresh_token },
      {},
      { refresh_token: "" },
      { refresh_token: "rt_x" },
    ]) {
      const r = await s.call("POST", "/v1/auth/logout", { body });
      assert.equal(r.status, 204);
      assert.equal(r.text, "");
    }
    const r = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token } });
    assert.equal(r.json.code, "refresh_token_invalid");
  });

  test("204 whatever the body: malformed JSON, wrong types, empty or no body, any Content-Type", async () => {
    const cases: { what: string; body?: string; contentType?: string }[] = [
      { what: "malformed JSON", body: "{", contentType: "application/json" },
      { what: "not an object", body: "[1,2]", contentType: "application/json" },
      { what: "JSON null", body: "null", contentType: "application/json" },
      { what: "wrong type", body: '{"refresh_token": 5}', contentType: "application/json" },
      { what: "wrong type (object)", body: '{"refresh_token": {"a": 1}}', contentType: "application/json" },
      { what: "empty body", body: "", contentType: "application/json" },
      { what: "no body, no Content-Type" },
      { what: "garbage Content-Type", body: '{"refresh_token": "rt_x"}', contentType: "text/garbage;;=" },
      { what: "form Content-Type", body: "refresh_token=rt_x", contentType: "application/x-www-form-urlencoded" },
      { what: "binary", body: "\u0000\u00ff\u0001", contentType: "application/octet-stream" },
    ];
    for (const c of cases) {
      const res = await fetch(`${s.base}/v1/auth/logout`, {
        method: "POST",
        headers: c.contentType ? { "content-type": c.contentType } : {},
        body: c.body,
      });
      assert.equal(res.status, 204, c.what);
      assert.equal(await res.text(), "", c.what);
    }
  });

  test("a readable token beside unknown fields or under another Content-Type is still revoked", async () => {
    for (const contentType of ["application/json", "text/plain"]) {
      const pair = await s.login();
      const res = await fetch(`${s.base}/v1/auth/logout`, {
        method: "POST",
        headers: { "content-type": contentType },
        body: JSON.stringify({ refresh_token: pair.refresh_token, unknown_field: true }),
      });
      assert.equal(res.status, 204, contentType);
      const r = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token } });
      assert.equal(r.json.code, "refresh_token_invalid", contentType);
    }
  });
});

describe("POST /v1/auth/revoke-all", () => {
  test("owner: 204 and every refresh token of the target revoked", async () => {
    const m = await member();
    const r = await s.call("POST", "/v1/auth/revoke-all", {
      token: owner.access_token,
      idem: idem(),
      body: { user_id: m.id },
    });
    assert.equal(r.status, 204);
    assert.equal(r.text, "");
    const refresh = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: m.refresh_token } });
    assert.equal(refresh.json.code, "refresh_token_invalid");
  });

  test("400 user_id_required / user_id_invalid; 403 insufficient_role; 401 without a JWT; 404 outside the org", async () => {
    const t = owner.access_token;
    let r = await s.call("POST", "/v1/auth/revoke-all", { token: t, idem: idem(), body: {} });
    assert.deepEqual([r.status, r.json.code], [400, "user_id_required"]);
    r = await s.call("POST", "/v1/auth/revoke-all", { token: t, idem: idem(), body: { user_id: "123" } });
    assert.deepEqual([r.status, r.json.code], [400, "user_id_invalid"]);
    const m = await member();
    r = await s.call("POST", "/v1/auth/revoke-all", {
      token: m.access_token,
      idem: idem(),
      body: { user_id: ownerId },
    });
    assert.deepEqual([r.status, r.json.code], [403, "insufficient_role"]);
    r = await s.call("POST", "/v1/auth/revoke-all", { idem: idem(), body: { user_id: ownerId } });
    assert.deepEqual([r.status, r.json.code], [401, "unauthenticated"]);
    r = await s.call("POST", "/v1/auth/revoke-all", {
      token: t,
      idem: idem(),
      body: { user_id: "00000000-0000-4000-8000-000000000000" },
    });
    assert.deepEqual([r.status, r.json.code], [404, "resource_not_found"]);
  });
});

describe("GET /v1/users/me", () => {
  test("200 profile with id, email, name, created_at (JWT or API key)", async () => {
    const r = await s.call("GET", "/v1/users/me", { token: owner.access_token });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.json).sort(), ["created_at", "email", "id", "name"]);
    assert.equal(r.json.email, "Owner@Example.com");
    assert.ok(!Number.isNaN(Date.parse(r.json.created_at)));
    const key = await s.call("POST", "/v1/users/me/api_keys", {
      token: owner.access_token,
      idem: idem(),
      body: { name: "me" },
    });
    const viaKey = await s.call("GET", "/v1/users/me", { token: key.json.raw_key });
    assert.deepEqual(viaKey.json, r.json);
  });

  test("401 without or with a bad credential", async () => {
    assert.equal((await s.call("GET", "/v1/users/me")).json.code, "unauthenticated");
    const r = await s.call("GET", "/v1/users/me", { token: "x.y.z" });
    assert.deepEqual([r.status, r.json.code], [401, "unauthenticated"]);
  });
});

describe("API keys", () => {
  test("POST 201 with id, key_prefix, raw_key, env, expires_at; GET lists; revoke 204 and gone", async () => {
    const t = owner.access_token;
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const created = await s.call("POST", "/v1/users/me/api_keys", {
      token: t,
      idem: idem(),
      body: { name: "ci", env: "test", expires_at: expires },
    });
    assert.equal(created.status, 201);
    // The specification's fields, and `scopes` (additive, issue 19).
    assert.deepEqual(Object.keys(created.json).sort(), ["env", "expires_at", "id", "key_prefix", "raw_key", "scopes"]);
    assert.equal(created.json.env, "test");
    assert.ok(created.json.raw_key.startsWith(created.json.key_prefix));
    assert.equal(Date.parse(created.json.expires_at), Date.parse(expires));

    const list = await s.call("GET", "/v1/users/me/api_keys", { token: created.json.raw_key });
    assert.equal(list.status, 200);
    assert.ok(Array.isArray(list.json));
    const item = list.json.find((k: { id: string }) => k.id === created.json.id);
    assert.ok(item);
    assert.equal(item.name, "ci");
    assert.equal(item.key_prefix, created.json.key_prefix);
    assert.equal(item.env, "test");
    assert.ok(item.last_used_at, "last_used_at after use");
    assert.ok(!list.text.includes(created.json.raw_key));
    const forever = await s.call("POST", "/v1/users/me/api_keys", {
      token: t,
      idem: idem(),
      body: { name: "forever" },
    });
    assert.equal(forever.json.expires_at, null, "a key without expiry shows expires_at: null");
    const listed = (await s.call("GET", "/v1/users/me/api_keys", { token: t })).json.find(
      (k: { id: string }) => k.id === forever.json.id,
    );
    assert.equal(listed.expires_at, null);
    assert.equal(listed.last_used_at, null, "never used: last_used_at null");

    const revoked = await s.call("POST", `/v1/users/me/api_keys/${created.json.id}/revoke`, { token: t, idem: idem() });
    assert.equal(revoked.status, 204);
    assert.equal(revoked.text, "");
    assert.equal((await s.call("GET", "/v1/users/me", { token: created.json.raw_key })).status, 401);
    const after_ = await s.call("GET", "/v1/users/me/api_keys", { token: t });
    assert.ok(!after_.json.some((k: { id: string }) => k.id === created.json.id));
  });

  test("an API key cannot create or revoke a key (403)", async () => {
    const key = await s.call("POST", "/v1/users/me/api_keys", {
      token: owner.access_token,
      idem: idem(),
      body: { name: "k" },
    });
    const r = await s.call("POST", "/v1/users/me/api_keys", {
      token: key.json.raw_key,
      idem: idem(),
      body: { name: "child" },
    });
    assert.deepEqual([r.status, r.json.code], [403, "insufficient_role"]);
    const v = await s.call("POST", `/v1/users/me/api_keys/${key.json.id}/revoke`, {
      token: key.json.raw_key,
      idem: idem(),
    });
    assert.deepEqual([v.status, v.json.code], [403, "insufficient_role"]);
  });

  test("Idempotency-Key: missing 400, replay with Idempotent-Replayed, mismatch 422", async () => {
    const t = owner.access_token;
    const missing = await s.call("POST", "/v1/users/me/api_keys", { token: t, body: { name: "x" } });
    assert.deepEqual([missing.status, missing.json.code], [400, "idempotency_key_required"]);
    const key = idem();
    const first = await s.call("POST", "/v1/users/me/api_keys", { token: t, idem: key, body: { name: "replay" } });
    const second = await s.call("POST", "/v1/users/me/api_keys", { token: t, idem: key, body: { name: "replay" } });
    assert.equal(second.status, 201);
    assert.equal(second.headers.get("idempotent-replayed"), "true");
    assert.equal(first.headers.get("idempotent-replayed"), null);
    assert.deepEqual(second.json, first.json);
    const other = await s.call("POST", "/v1/users/me/api_keys", { token: t, idem: key, body: { name: "different" } });
    assert.deepEqual([other.status, other.json.code], [422, "idempotency_key_mismatch"]);
  });
});

describe("orgs", () => {
  test("GET 200 own org with id, name, slug, created_at, updated_at; 404 for another org", async () => {
    const r = await s.call("GET", `/v1/orgs/${orgId}`, { token: owner.access_token });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.json).sort(), ["created_at", "id", "name", "slug", "updated_at"]);
    assert.equal(r.json.name, "Acme Inc");
    assert.equal(r.json.slug, "acme-inc");
    const other = await s.identity.orgs.create({ name: "Other Org" });
    const x = await s.call("GET", `/v1/orgs/${other.id}`, { token: owner.access_token });
    assert.deepEqual([x.status, x.json.code], [404, "resource_not_found"]);
  });

  test("PATCH: owner only; omitted fields unchanged; slug conflict 409", async () => {
    const t = owner.access_token;
    const before_ = (await s.call("GET", `/v1/orgs/${orgId}`, { token: t })).json;
    const r = await s.call("PATCH", `/v1/orgs/${orgId}`, { token: t, idem: idem(), body: { name: "Acme Renamed" } });
    assert.equal(r.status, 200);
    assert.equal(r.json.name, "Acme Renamed");
    assert.equal(r.json.slug, before_.slug);
    assert.ok(Date.parse(r.json.updated_at) >= Date.parse(before_.updated_at));
    const slug = await s.call("PATCH", `/v1/orgs/${orgId}`, { token: t, idem: idem(), body: { slug: "acme-two" } });
    assert.deepEqual([slug.json.name, slug.json.slug], ["Acme Renamed", "acme-two"]);
    await s.identity.orgs.create({ name: "Taken", slug: "taken-slug" });
    const conflict = await s.call("PATCH", `/v1/orgs/${orgId}`, {
      token: t,
      idem: idem(),
      body: { slug: "taken-slug" },
    });
    assert.equal(conflict.status, 409);
    const m = await member();
    const denied = await s.call("PATCH", `/v1/orgs/${orgId}`, {
      token: m.access_token,
      idem: idem(),
      body: { name: "Mine" },
    });
    assert.deepEqual([denied.status, denied.json.code], [403, "insufficient_role"]);
  });
});
