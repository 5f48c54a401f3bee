// Issue 19 items 2 and 3 through the real server: organizations of one user
// (create, list, switch, where login lands), sign-up behind its setting, the
// user's own name and password.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let open: TestServer;
let owner: { access_token: string; refresh_token: string };
let firstOrg: string;
before(async () => {
  [s, open] = await Promise.all([startTestServer(), startTestServer({ IDENTITY_SIGNUP: "open" })]);
  owner = await s.login();
  firstOrg = claims(owner.access_token).org_id;
});
after(() => Promise.all([s.close(), open.close()]));

let n = 0;
const idem = () => `idem-${Date.now()}-${n++}`;
const claims = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as { org_id: string; sub: string };

describe("organizations", () => {
  test("create (the caller is its owner), list mine oldest first, switch without a password; login still lands in the oldest", async () => {
    const created = await s.call("POST", "/v1/orgs", {
      token: owner.access_token,
      idem: idem(),
      body: { name: "Second Team", slug: `second-${n++}` },
    });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(Object.keys(created.json).sort(), ["created_at", "id", "name", "slug", "updated_at"]);
    const second = created.json.id as string;

    const mine = await s.call("GET", "/v1/users/me/orgs", { token: owner.access_token });
    assert.equal(mine.status, 200);
    assert.deepEqual(
      mine.json.map((m: { org: { id: string }; role: string }) => [m.org.id, m.role]),
      [
        [firstOrg, "owner"],
        [second, "owner"],
      ],
    );

    const sw = await s.call("POST", "/v1/auth/switch-org", {
      token: owner.access_token,
      idem: idem(),
      body: { org_id: second },
    });
    assert.equal(sw.status, 200, sw.text);
    assert.deepEqual(Object.keys(sw.json).sort(), ["access_token", "expires_in", "refresh_token", "token_type"]);
    assert.equal(claims(sw.json.access_token).org_id, second);
    assert.equal((await s.call("GET", `/v1/orgs/${second}`, { token: sw.json.access_token })).status, 200);
    assert.equal((await s.call("GET", `/v1/orgs/${firstOrg}`, { token: sw.json.access_token })).status, 404);
    // The new refresh token stays in the second org.
    const refreshed = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: sw.json.refresh_token } });
    assert.equal(claims(refreshed.json.access_token).org_id, second);

    assert.equal(claims((await s.login()).access_token).org_id, firstOrg);
    const entries = await s.identity.db
      .selectFrom("audit_events")
      .select(["action", "org_id"])
      .where("target_id", "=", second)
      .orderBy("id")
      .execute();
    assert.deepEqual(
      entries.map((e) => e.action),
      ["org.created", "auth.org_switched"],
    );
  });

  test("switch refuses an org of which the caller is not a member (404), a malformed id (400), an API key (403), no Idempotency-Key (400)", async () => {
    const stranger = await s.identity.orgs.create({ name: `Stranger ${n++}` });
    const r = await s.call("POST", "/v1/auth/switch-org", {
      token: owner.access_token,
      idem: idem(),
      body: { org_id: stranger.id },
    });
    assert.equal(r.status, 404);
    assert.equal(r.json.code, "resource_not_found");
    assert.equal(
      (await s.call("POST", "/v1/auth/switch-org", { token: owner.access_token, idem: idem(), body: { org_id: "x" } }))
        .status,
      400,
    );
    const key = await s.call("POST", "/v1/users/me/api_keys", {
      token: owner.access_token,
      idem: idem(),
      body: { name: "k" },
    });
    const byKey = await s.call("POST", "/v1/auth/switch-org", {
      token: key.json.raw_key,
      idem: idem(),
      body: { org_id: firstOrg },
    });
    assert.equal(byKey.status, 403);
    assert.equal(byKey.json.code, "insufficient_role");
    const noKey = await s.call("POST", "/v1/auth/switch-org", {
      token: owner.access_token,
      body: { org_id: firstOrg },
    });
    assert.equal(noKey.json.code, "idempotency_key_required");
    const dup = await s.call("POST", "/v1/orgs", {
      token: owner.access_token,
      idem: idem(),
      body: { name: "Dup", slug: "acme-inc" },
    });
    assert.equal(dup.status, 409);
    assert.equal(
      (await s.call("POST", "/v1/orgs", { token: owner.access_token, idem: idem(), body: { name: "" } })).status,
      400,
    );
  });
});

describe("sign-up", () => {
  test("off by default: 403 signup_disabled, nothing created", async () => {
    const r = await s.call("POST", "/v1/auth/signup", {
      body: { email: "self@example.com", password: "self-password-1", name: "Self" },
    });
    assert.equal(r.status, 403);
    assert.equal(r.json.code, "signup_disabled");
    assert.equal(await s.identity.users.findByEmail("self@example.com"), undefined);
  });

  test("IDENTITY_SIGNUP=open: a user owning a new org, signed in; a taken email 409; a short password 400", async () => {
    const r = await open.call("POST", "/v1/auth/signup", {
      body: { email: "Self@example.com", password: "self-password-1", name: "Self", org_name: "Acme Inc" },
    });
    assert.equal(r.status, 201, r.text);
    const org = claims(r.json.access_token).org_id;
    const got = await open.call("GET", `/v1/orgs/${org}`, { token: r.json.access_token });
    assert.equal(got.json.name, "Acme Inc");
    assert.notEqual(got.json.slug, "acme-inc", "the bootstrap org holds that slug: a unique one is made");
    assert.equal(
      (await open.call("GET", `/v1/orgs/${org}/members`, { token: r.json.access_token })).json[0].role,
      "owner",
    );
    assert.equal((await open.login("self@example.com", "self-password-1")).token_type, "Bearer");
    const again = await open.call("POST", "/v1/auth/signup", {
      body: { email: "SELF@example.com", password: "other-password", name: "Again" },
    });
    assert.equal(again.status, 409);
    assert.equal(
      (await open.call("POST", "/v1/auth/signup", { body: { email: "x@example.com", password: "short" } })).status,
      400,
    );
  });
});

describe("the user's own account", () => {
  test("change name; change password: the current one required, every other session revoked, a new pair returned", async () => {
    const u = await s.identity.users.create({
      email: `acct${n++}@example.com`,
      name: "Before",
      password: "first-password",
    });
    await s.identity.db.insertInto("memberships").values({ user_id: u.id, org_id: firstOrg, role: "member" }).execute();
    const a = await s.login(u.email, "first-password");
    const b = await s.login(u.email, "first-password");

    const renamed = await s.call("PATCH", "/v1/users/me", {
      token: a.access_token,
      idem: idem(),
      body: { name: "After" },
    });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.json.name, "After");
    assert.equal((await s.call("GET", "/v1/users/me", { token: b.access_token })).json.name, "After");
    assert.equal(
      (await s.call("PATCH", "/v1/users/me", { token: a.access_token, idem: idem(), body: { name: " " } })).status,
      400,
    );

    const wrong = await s.call("POST", "/v1/users/me/password", {
      token: a.access_token,
      idem: idem(),
      body: { current_password: "nope-nope", new_password: "second-password" },
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.code, "unauthenticated");
    const weak = await s.call("POST", "/v1/users/me/password", {
      token: a.access_token,
      idem: idem(),
      body: { current_password: "first-password", new_password: "short" },
    });
    assert.equal(weak.status, 400);

    const changed = await s.call("POST", "/v1/users/me/password", {
      token: a.access_token,
      idem: idem(),
      body: { current_password: "first-password", new_password: "second-password" },
    });
    assert.equal(changed.status, 200, changed.text);
    for (const old of [a.refresh_token, b.refresh_token]) {
      assert.equal(
        (await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: old } })).json.code,
        "refresh_token_invalid",
      );
    }
    assert.equal(
      (await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: changed.json.refresh_token } })).status,
      200,
    );
    assert.equal(
      (await s.call("POST", "/v1/auth/login", { body: { email: u.email, password: "first-password" } })).status,
      401,
    );
    await s.login(u.email, "second-password");
    const entries = await s.identity.db
      .selectFrom("audit_events")
      .select(["action", "details"])
      .where("target_id", "=", u.id)
      .orderBy("id")
      .execute();
    assert.deepEqual(
      entries.map((e) => e.action).filter((a) => a.startsWith("user.")),
      ["user.updated", "user.password_changed"],
    );
    // The refused old password after the change is there too.
    assert.ok(entries.some((e) => e.action === "auth.login_failed"));
    assert.ok(!JSON.stringify(entries).includes('password":"'), "no password in the audit log");
    assert.ok(!JSON.stringify(entries).includes("second-password"));
  });
});
