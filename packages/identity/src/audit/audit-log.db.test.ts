// Issue 19 item 6 through the real server: identity's mutations are in the
// org's audit log with actor, time, request id and client address; owners
// page through it with a cursor and filters; nothing secret is in it.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

let n = 0;
const idem = () => `audit-${Date.now()}-${n++}`;

test("logins, failed logins, keys, org changes, invitations, members and refresh reuse are recorded; pages and filters; nothing secret", async () => {
  const failed = await s.call("POST", "/v1/auth/login", {
    body: { email: "owner@example.com", password: "wrong-password" },
    headers: { "x-request-id": "req-failed-1" },
  });
  assert.equal(failed.status, 401);
  const owner = await s.login();
  const t = owner.access_token;
  const me = (await s.call("GET", "/v1/users/me", { token: t })).json.id as string;
  const orgId = JSON.parse(Buffer.from(t.split(".")[1]!, "base64url").toString()).org_id as string;

  const key = await s.call("POST", "/v1/users/me/api_keys", {
    token: t,
    idem: idem(),
    body: { name: "audited" },
    headers: { "x-request-id": "req-key-1" },
  });
  assert.equal(
    (await s.call("POST", `/v1/users/me/api_keys/${key.json.id}/revoke`, { token: t, idem: idem() })).status,
    204,
  );
  assert.equal(
    (await s.call("PATCH", `/v1/orgs/${orgId}`, { token: t, idem: idem(), body: { name: "Renamed Inc" } })).status,
    200,
  );
  const inv = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
    token: t,
    idem: idem(),
    body: { email: "dana@example.com" },
  });
  const joined = await s.call("POST", "/v1/invitations/accept", {
    body: { token: inv.json.token, password: "dana-password-1" },
  });
  const dana = JSON.parse(Buffer.from(joined.json.access_token.split(".")[1], "base64url").toString()).sub as string;
  // Dana's refresh token used twice: reuse detected.
  await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: joined.json.refresh_token } });
  assert.equal(
    (await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: joined.json.refresh_token } })).json.code,
    "refresh_token_reused",
  );
  assert.equal((await s.call("DELETE", `/v1/orgs/${orgId}/members/${dana}`, { token: t, idem: idem() })).status, 204);

  const all: Array<Record<string, unknown>> = [];
  let after = "";
  for (let page = 0; page < 20; page++) {
    const r = await s.call("GET", `/v1/orgs/${orgId}/audit_events?limit=3${after ? `&after=${after}` : ""}`, {
      token: t,
    });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.items.length <= 3);
    all.push(...r.json.items);
    if (!r.json.next) break;
    after = r.json.next;
  }
  const actions = all.map((e) => e.action).reverse();
  for (const a of [
    "auth.login_failed",
    "auth.login",
    "api_key.created",
    "api_key.revoked",
    "org.updated",
    "member.invited",
    "invitation.accepted",
    "auth.refresh_reused",
    "member.removed",
  ]) {
    assert.ok(actions.includes(a), `${a} in ${actions.join(", ")}`);
  }
  assert.ok(actions.indexOf("api_key.created") < actions.indexOf("api_key.revoked"), "newest first, by id");
  const created = all.find((e) => e.action === "api_key.created")!;
  assert.equal(created.actor_user_id, me);
  assert.equal(created.org_id, orgId);
  assert.equal(created.request_id, "req-key-1");
  assert.equal(created.client_address, "127.0.0.1");
  assert.ok(!Number.isNaN(Date.parse(created.created_at as string)));
  assert.equal(all.find((e) => e.action === "auth.login_failed")!.request_id, "req-failed-1");

  const text = JSON.stringify(all);
  for (const secret of [
    key.json.raw_key,
    inv.json.token,
    joined.json.refresh_token,
    joined.json.access_token,
    "dana-password-1",
    "wrong-password",
    "owner-password-1",
  ]) {
    assert.ok(!text.includes(secret), "a secret in the audit log");
  }

  const onlyMembers = await s.call("GET", `/v1/orgs/${orgId}/audit_events?action=member.`, { token: t });
  assert.deepEqual([...new Set(onlyMembers.json.items.map((e: { action: string }) => e.action))].sort(), [
    "member.invited",
    "member.removed",
  ]);
  const byDana = await s.call("GET", `/v1/orgs/${orgId}/audit_events?actor_user_id=${dana}`, { token: t });
  assert.deepEqual(
    byDana.json.items.map((e: { action: string }) => e.action),
    ["invitation.accepted"],
  );
  for (const q of ["limit=101", "limit=-1", "after=abc", "action=DROP%20TABLE", "actor_user_id=x"]) {
    const r = await s.call("GET", `/v1/orgs/${orgId}/audit_events?${q}`, { token: t });
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assert.equal(r.json.code, "invalid_request");
  }
  // Owners only; another org's log is 404.
  const other = await s.call("POST", "/v1/orgs", { token: t, idem: idem(), body: { name: "Other Audit" } });
  assert.equal((await s.call("GET", `/v1/orgs/${other.json.id}/audit_events`, { token: t })).status, 404);
  const member = await s.identity.users.create({ email: "mo@example.com", name: "Mo", password: "mo-password-1" });
  await s.identity.db.insertInto("memberships").values({ user_id: member.id, org_id: orgId, role: "member" }).execute();
  const mo = await s.login("mo@example.com", "mo-password-1");
  const refused = await s.call("GET", `/v1/orgs/${orgId}/audit_events`, { token: mo.access_token });
  assert.equal(refused.status, 403);
  assert.equal(refused.json.code, "insufficient_role");
});

test("a failed mutation leaves no audit entry (same transaction)", async () => {
  const t = (await s.login()).access_token;
  const orgId = JSON.parse(Buffer.from(t.split(".")[1]!, "base64url").toString()).org_id as string;
  const before = await s.identity.db
    .selectFrom("audit_events")
    .select("id")
    .where("action", "=", "org.updated")
    .execute();
  const dup = await s.call("POST", "/v1/orgs", { token: t, idem: idem(), body: { name: "Taken", slug: "taken-slug" } });
  assert.equal(dup.status, 201);
  const clash = await s.call("PATCH", `/v1/orgs/${orgId}`, { token: t, idem: idem(), body: { slug: "taken-slug" } });
  assert.equal(clash.status, 409);
  const after = await s.identity.db
    .selectFrom("audit_events")
    .select("id")
    .where("action", "=", "org.updated")
    .execute();
  assert.equal(after.length, before.length);
});
