// Security suite, REST half: hostile input on every endpoint is a 4xx in the
// identity envelope, never a 5xx; no response or log line carries a password,
// a raw API key, a refresh token, the KEK or a signing private key. (The JWT
// forgery half is in src/security.db.test.ts.)
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type TestServer, startTestServer } from "../testing/server.ts";

const BODY_LIMIT = 16 * 1024;
const OWNER_PASSWORD = "owner-password-1";
const KEK = "ab".repeat(32);

let s: TestServer;
let jwt: string;
let orgId: string;
let rawKey: string;
let keyId: string;
const secrets: string[] = [OWNER_PASSWORD, KEK];
// Responses that are not supposed to carry a secret, checked at the end.
const bodies: string[] = [];

before(async () => {
  s = await startTestServer({
    BODY_LIMIT_BYTES: String(BODY_LIMIT),
    IDENTITY_AUTHKEY_KEK: KEK,
    BOOTSTRAP_OWNER_PASSWORD: OWNER_PASSWORD,
  });
  const pair = await s.login();
  jwt = pair.access_token;
  secrets.push(pair.refresh_token);
  const again = await s.login();
  secrets.push(again.refresh_token);
  await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: again.refresh_token } });
  await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: again.refresh_token } }); // reuse, logged as a 401
  const created = await s.call("POST", "/v1/users/me/api_keys", { token: jwt, idem: "sec-key", body: { name: "sec" } });
  rawKey = created.json.raw_key;
  keyId = created.json.id;
  secrets.push(rawKey);
  orgId =
    (await s.call("GET", "/v1/users/me/api_keys", { token: rawKey })).json &&
    (await s.identity.db.selectFrom("orgs").select("id").executeTakeFirstOrThrow()).id;
  const { privateKey } = await s.identity.keys.active();
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  // Any 48-character run of the PEM body would betray the key.
  const bodyB64 = pem
    .split("\n")
    .filter((l) => l && !l.startsWith("-----"))
    .join("");
  for (let i = 0; i + 48 <= bodyB64.length; i += 400) secrets.push(bodyB64.slice(i, i + 48));
  secrets.push(privateKey.export({ type: "pkcs8", format: "der" }).toString("hex").slice(40, 120));
});
after(() => s.close());

type Endpoint = { method: string; path: string; auth: boolean; idem: boolean; body: boolean };
const endpoints = (): Endpoint[] => [
  { method: "POST", path: "/v1/auth/login", auth: false, idem: false, body: true },
  { method: "POST", path: "/v1/auth/refresh", auth: false, idem: false, body: true },
  { method: "POST", path: "/v1/auth/logout", auth: false, idem: false, body: true },
  { method: "POST", path: "/v1/auth/revoke-all", auth: true, idem: true, body: true },
  { method: "GET", path: "/v1/users/me", auth: true, idem: false, body: false },
  { method: "GET", path: "/v1/users/me/api_keys", auth: true, idem: false, body: false },
  { method: "POST", path: "/v1/users/me/api_keys", auth: true, idem: true, body: true },
  { method: "POST", path: `/v1/users/me/api_keys/${keyId}/revoke`, auth: true, idem: true, body: false },
  { method: "GET", path: `/v1/orgs/${orgId}`, auth: true, idem: false, body: false },
  { method: "PATCH", path: `/v1/orgs/${orgId}`, auth: true, idem: true, body: true },
];

let idemN = 0;
async function hostile(
  e: Endpoint,
  init: { raw?: string; body?: unknown; headers?: Record<string, string>; path?: string; token?: string | null },
) {
  const r = await s.call(e.method, init.path ?? e.path, {
    raw: init.raw,
    body: init.body,
    headers: init.headers,
    token: init.token === null ? undefined : (init.token ?? (e.auth ? jwt : undefined)),
    idem: e.idem ? `hostile-${idemN++}` : undefined,
  });
  const what = `${e.method} ${init.path ?? e.path} ${JSON.stringify(init).slice(0, 120)} → ${r.status} ${r.text.slice(0, 200)}`;
  assert.ok(r.status < 500, what);
  bodies.push(r.text);
  return { ...r, what };
}

function is4xxEnvelope(r: { status: number; json: unknown; what: string }) {
  assert.ok(r.status >= 400 && r.status < 500, r.what);
  const body = r.json as { code?: unknown; message?: unknown };
  assert.equal(typeof body?.code, "string", r.what);
  assert.equal(typeof body?.message, "string", r.what);
}

/** Logout answers 204 whatever its body (spec: always 204); every other endpoint refuses in the envelope. */
function refusedUnlessLogout(
  e: Endpoint,
  r: { status: number; json: unknown; text: string; what: string },
  status?: number,
) {
  if (e.path === "/v1/auth/logout") {
    assert.deepEqual([r.status, r.text], [204, ""], r.what);
    return;
  }
  is4xxEnvelope(r);
  if (status !== undefined) assert.equal(r.status, status, r.what);
}

describe("hostile input on every endpoint", () => {
  test("malformed JSON → 400 invalid_request (logout: 204 by contract)", async () => {
    for (const e of endpoints().filter((x) => x.body)) {
      for (const raw of ["{", '{"email":', "nul", '{"a":1}}', "\u0000", '"just a string"', "[1,2]", "1e999999"]) {
        refusedUnlessLogout(e, await hostile(e, { raw }), 400);
      }
    }
  });

  test("wrong types → 400 (logout: 204 by contract)", async () => {
    const cases = [
      { email: 1, password: true },
      { email: ["a"], password: { x: 1 } },
      { refresh_token: 12 },
      { user_id: 5 },
      { name: { nested: true } },
      { env: 7 },
      { expires_at: "yesterday" },
      { expires_at: 12345 },
      { slug: ["x"] },
      { name: null, slug: 3 },
      { x_device_label: 99 },
    ];
    for (const e of endpoints().filter((x) => x.body)) {
      for (const body of cases) refusedUnlessLogout(e, await hostile(e, { body }));
    }
  });

  test("missing fields and empty bodies → 4xx (logout: 204 by contract)", async () => {
    for (const e of endpoints().filter((x) => x.body)) {
      for (const init of [{ body: {} }, { raw: "" }]) {
        const r = await hostile(e, init);
        if (e.path === "/v1/auth/logout") assert.equal(r.status, 204, r.what);
        else if (e.path.startsWith("/v1/orgs/"))
          assert.equal(r.status, 200, r.what); // PATCH: all fields optional, nothing changes
        else is4xxEnvelope(r);
      }
    }
  });

  test("oversized bodies → 413 payload_too_large", async () => {
    const huge = JSON.stringify({
      email: "a@b.c",
      password: "x".repeat(BODY_LIMIT * 2),
      name: "n",
      refresh_token: "rt_",
      user_id: "u",
    });
    for (const e of endpoints().filter((x) => x.body)) {
      const r = await hostile(e, { raw: huge });
      is4xxEnvelope(r);
      assert.equal(r.status, 413, r.what);
    }
  });

  test("bad UUIDs in paths and bodies → 400 (or 404 for a well-formed UUID of nobody)", async () => {
    const bad = [
      "not-a-uuid",
      "123",
      "00000000-0000-0000-0000-00000000000g",
      "%00",
      "..%2F..%2Fetc",
      "a".repeat(2000),
      "%F0%9F%92%A9",
      "00000000000000000000000000000000",
    ];
    for (const id of bad) {
      for (const e of endpoints().filter((x) => x.path.includes(keyId) || x.path.includes(orgId))) {
        const path = e.path.replace(keyId, id).replace(orgId, id);
        const r = await hostile(e, { path, body: e.body ? {} : undefined });
        is4xxEnvelope(r);
      }
      const r = await hostile(endpoints()[3]!, { body: { user_id: decodeURIComponent(id.includes("%") ? "x" : id) } });
      is4xxEnvelope(r);
    }
  });

  test("wrong Content-Type → 415 (logout: 204), unknown routes 404, wrong methods 405, all in the envelope", async () => {
    for (const e of endpoints().filter((x) => x.body)) {
      refusedUnlessLogout(
        e,
        await hostile(e, { raw: "email=a", headers: { "content-type": "application/x-www-form-urlencoded" } }),
      );
    }
    is4xxEnvelope(await hostile(endpoints()[0]!, { path: "/v1/nope" }));
    const wrong = await s.call("DELETE", "/v1/users/me", { token: jwt });
    assert.ok(wrong.status >= 400 && wrong.status < 500, `${wrong.status}`);
  });

  test("hostile credentials → 401 unauthenticated", async () => {
    const tokens = [
      "",
      "Bearer",
      "a".repeat(10_000),
      "sk_live_",
      "sk_live_" + "A".repeat(49),
      "eyJhbGciOiJub25lIn0.e30.",
      "rt_" + "x".repeat(40),
      "\u00ff\u00fe",
    ];
    for (const e of endpoints().filter((x) => x.auth)) {
      for (const t of tokens) {
        const r = await hostile(e, {
          headers: { authorization: `Bearer ${t}` },
          token: null,
          body: e.body ? {} : undefined,
        });
        is4xxEnvelope(r);
        assert.equal(r.status, 401, r.what);
      }
    }
  });
});

describe("secrets", () => {
  test("no response other than login/refresh/create-key, and no log line, contains a secret", async () => {
    assert.ok(s.logs.lines.length > 50, `only ${s.logs.lines.length} log lines`);
    for (const secret of secrets) {
      for (const body of bodies) assert.ok(!body.includes(secret), `response contains a secret: ${body.slice(0, 200)}`);
      const line = s.logs.lines.find((l) => l.includes(secret));
      assert.equal(line, undefined, `log line contains a secret: ${line?.slice(0, 300)}`);
    }
  });

  test("the stored rows hold no raw key or refresh token", async () => {
    const dump = JSON.stringify(
      [
        await s.identity.db.selectFrom("api_keys").selectAll().execute(),
        await s.identity.db.selectFrom("refresh_tokens").selectAll().execute(),
        await s.identity.db.selectFrom("users").selectAll().execute(),
        await s.identity.db.selectFrom("idempotency_keys").selectAll().execute(),
      ],
      (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v),
    );
    for (const secret of secrets) assert.ok(!dump.includes(secret), "a secret is stored in clear");
  });
});
