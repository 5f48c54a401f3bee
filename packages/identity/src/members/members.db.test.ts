// Issue 19 item 1: the whole life of a member through the real server (REST
// on its port): invite, accept, act, promote/demote, remove, refused; the
// last owner; every refusal of an invitation with its own reason; audit
// entries in the same transaction as each change.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let owner: { access_token: string; refresh_token: string };
let orgId: string;
let ownerId: string;
before(async () => {
  s = await startTestServer();
  owner = await s.login();
  ownerId = (await s.call("GET", "/v1/users/me", { token: owner.access_token })).json.id;
  orgId = JSON.parse(Buffer.from(owner.access_token.split(".")[1]!, "base64url").toString()).org_id;
});
after(() => s.close());

let n = 0;
const idem = () => `idem-${Date.now()}-${n++}`;
const email = () => `person${n++}-${Date.now()}@example.com`;

async function invite(to: string, role = "member", token = owner.access_token) {
  return s.call("POST", `/v1/orgs/${orgId}/invitations`, { token, idem: idem(), body: { email: to, role } });
}
async function accept(body: Record<string, string>) {
  return s.call("POST", "/v1/invitations/accept", { body });
}
async function audit(action: string, targetId?: string) {
  let q = s.identity.db.selectFrom("audit_events").selectAll().where("org_id", "=", orgId).where("action", "=", action);
  if (targetId) q = q.where("target_id", "=", targetId);
  return q.orderBy("id").execute();
}

/** A new member of the owner's org, signed in through an accepted invitation. */
async function newMember(role = "member") {
  const to = email();
  const inv = await invite(to, role);
  assert.equal(inv.status, 201, inv.text);
  const acc = await accept({ token: inv.json.token, password: "member-password-1", name: "New Person" });
  assert.equal(acc.status, 200, acc.text);
  const id = (await s.call("GET", "/v1/users/me", { token: acc.json.access_token })).json.id as string;
  return { id, email: to, ...(acc.json as { access_token: string; refresh_token: string }) };
}

describe("invitations", () => {
  test("an owner invites; the token is returned once and stored only as its SHA-256", async () => {
    const to = email();
    const r = await invite(to, "member");
    assert.equal(r.status, 201, r.text);
    assert.match(r.json.token, /^inv_[0-9A-Za-z]{40,}$/);
    assert.deepEqual(Object.keys(r.json).sort(), ["invitation", "token"]);
    assert.equal(r.json.invitation.email, to);
    assert.equal(r.json.invitation.role, "member");
    assert.equal(r.json.invitation.org_id, orgId);
    const days = (Date.parse(r.json.invitation.expires_at) - Date.now()) / 86400_000;
    assert.ok(days > 6.9 && days <= 7, `expires in ${days} days`);
    const row = await s.identity.db
      .selectFrom("invitations")
      .selectAll()
      .where("id", "=", r.json.invitation.id)
      .executeTakeFirstOrThrow();
    assert.ok(!JSON.stringify(row).includes(r.json.token.slice(4)), "raw token stored");
    const listed = await s.call("GET", `/v1/orgs/${orgId}/invitations`, { token: owner.access_token });
    assert.equal(listed.status, 200);
    assert.ok(listed.json.some((i: { id: string }) => i.id === r.json.invitation.id));
    assert.ok(!listed.text.includes("inv_"), "list shows no token");
    const entries = await audit("member.invited", r.json.invitation.id);
    assert.equal(entries.length, 1);
    assert.equal(entries[0]!.actor_user_id, ownerId);
    assert.ok(entries[0]!.request_id);
    assert.equal(entries[0]!.client_address, "127.0.0.1");
    assert.ok(!JSON.stringify(entries).includes(r.json.token));
  });

  test("Idempotency-Key: required; a retry replays the same invitation", async () => {
    const to = email();
    const missing = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
      token: owner.access_token,
      body: { email: to },
    });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.code, "idempotency_key_required");
    const key = idem();
    const a = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
      token: owner.access_token,
      idem: key,
      body: { email: to },
    });
    const b = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
      token: owner.access_token,
      idem: key,
      body: { email: to },
    });
    assert.equal(a.status, 201);
    assert.equal(b.status, 201);
    assert.equal(b.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(b.json, a.json);
    assert.equal((await audit("member.invited", a.json.invitation.id)).length, 1);
  });

  test("bad input: 400 invalid_request; another org's path 404; a member 403 insufficient_role; an existing member 409 already_member", async () => {
    for (const body of [{ email: "not-an-email" }, { email: email(), role: "admin" }, { email: "" }]) {
      const r = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
        token: owner.access_token,
        idem: idem(),
        body,
      });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.code, "invalid_request");
    }
    const other = await s.call("POST", "/v1/orgs", {
      token: owner.access_token,
      idem: idem(),
      body: { name: `Other ${n++}` },
    });
    assert.equal(other.status, 201, other.text);
    const cross = await s.call("POST", `/v1/orgs/${other.json.id}/invitations`, {
      token: owner.access_token,
      idem: idem(),
      body: { email: email() },
    });
    assert.equal(cross.status, 404);
    assert.equal(cross.json.code, "resource_not_found");
    assert.equal(
      (await s.call("GET", `/v1/orgs/${other.json.id}/members`, { token: owner.access_token })).json.code,
      "resource_not_found",
    );
    const bad = await s.call("GET", "/v1/orgs/nope/members", { token: owner.access_token });
    assert.equal(bad.status, 400);
    const m = await newMember();
    const byMember = await invite(email(), "member", m.access_token);
    assert.equal(byMember.status, 403);
    assert.equal(byMember.json.code, "insufficient_role");
    const again = await invite(m.email.toUpperCase());
    assert.equal(again.status, 409);
    assert.equal(again.json.code, "already_member");
  });

  test("refusals on acceptance: unknown, used, expired, revoked, another email; each with its own reason", async () => {
    const unknown = await accept({ token: "inv_doesnotexist", password: "whatever-123" });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.code, "invitation_invalid");

    const to = email();
    const inv = await invite(to);
    const mismatch = await accept({
      token: inv.json.token,
      password: "member-password-1",
      email: "someone-else@example.com",
    });
    assert.equal(mismatch.status, 403);
    assert.equal(mismatch.json.code, "invitation_email_mismatch");
    const short = await accept({ token: inv.json.token, password: "short" });
    assert.equal(short.status, 400);
    assert.equal(short.json.code, "invalid_request");
    const ok = await accept({ token: inv.json.token, password: "member-password-1", email: to.toUpperCase() });
    assert.equal(ok.status, 200, ok.text);
    const used = await accept({ token: inv.json.token, password: "member-password-1" });
    assert.equal(used.status, 409);
    assert.equal(used.json.code, "invitation_used");

    const old = await invite(email());
    await s.identity.db
      .updateTable("invitations")
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where("id", "=", old.json.invitation.id)
      .execute();
    const expired = await accept({ token: old.json.token, password: "member-password-1" });
    assert.equal(expired.status, 400);
    assert.equal(expired.json.code, "invitation_expired");

    const revoked = await invite(email());
    const rv = await s.call("POST", `/v1/orgs/${orgId}/invitations/${revoked.json.invitation.id}/revoke`, {
      token: owner.access_token,
      idem: idem(),
    });
    assert.equal(rv.status, 204, rv.text);
    assert.equal(
      (await accept({ token: revoked.json.token, password: "member-password-1" })).json.code,
      "invitation_invalid",
    );
    assert.equal((await audit("invitation.revoked", revoked.json.invitation.id)).length, 1);

    // A newer invitation for the same email replaces the pending one.
    const target = email();
    const first = await invite(target);
    const second = await invite(target, "owner");
    assert.equal(
      (await accept({ token: first.json.token, password: "member-password-1" })).json.code,
      "invitation_invalid",
    );
    assert.equal((await accept({ token: second.json.token, password: "member-password-1" })).status, 200);
  });

  test("concurrent acceptances of one token: exactly one wins", async () => {
    const inv = await invite(email());
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => accept({ token: inv.json.token, password: "member-password-1" })),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 409, 409, 409]);
    assert.equal((await audit("invitation.accepted", inv.json.invitation.id)).length, 1);
  });

  test("an existing user is added with their current password; the invitation cannot reset it", async () => {
    const elsewhere = await s.call("POST", "/v1/orgs", {
      token: owner.access_token,
      idem: idem(),
      body: { name: `Elsewhere ${n++}` },
    });
    const to = email();
    const u = await s.identity.users.create({ email: to, name: "Existing", password: "their-own-password" });
    await s.identity.db
      .insertInto("memberships")
      .values({ user_id: u.id, org_id: elsewhere.json.id, role: "member" })
      .execute();
    const inv = await invite(to);
    const takeover = await accept({ token: inv.json.token, password: "attacker-chosen-pw" });
    assert.equal(takeover.status, 401);
    assert.equal(takeover.json.code, "unauthenticated");
    assert.equal(
      (await s.call("POST", "/v1/auth/login", { body: { email: to, password: "attacker-chosen-pw" } })).status,
      401,
    );
    const ok = await accept({ token: inv.json.token, password: "their-own-password" });
    assert.equal(ok.status, 200, ok.text);
    const claims = JSON.parse(Buffer.from(ok.json.access_token.split(".")[1], "base64url").toString());
    assert.equal(claims.org_id, orgId);
    assert.equal(claims.sub, u.id);
  });
});

describe("members", () => {
  test("the life of a member: accept, act, promote, demote, remove; then refused everywhere", async () => {
    const m = await newMember();
    // Acts as a member: reads its profile and org, is not an owner.
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}`, { token: m.access_token })).status, 200);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/members`, { token: m.access_token })).status, 403);
    const key = await s.call("POST", "/v1/users/me/api_keys", {
      token: m.access_token,
      idem: idem(),
      body: { name: "member key" },
    });
    assert.equal(key.status, 201);

    const list = await s.call("GET", `/v1/orgs/${orgId}/members`, { token: owner.access_token });
    assert.equal(list.status, 200);
    const row = list.json.find((x: { user_id: string }) => x.user_id === m.id);
    assert.deepEqual(Object.keys(row).sort(), ["created_at", "email", "name", "role", "user_id"]);
    assert.equal(row.role, "member");
    assert.equal(row.name, "New Person");

    const up = await s.call("PATCH", `/v1/orgs/${orgId}/members/${m.id}`, {
      token: owner.access_token,
      idem: idem(),
      body: { role: "owner" },
    });
    assert.equal(up.status, 200, up.text);
    assert.equal(up.json.role, "owner");
    assert.equal(
      (await s.call("GET", `/v1/orgs/${orgId}/members`, { token: m.access_token })).status,
      200,
      "the same JWT now acts as owner",
    );
    const down = await s.call("PATCH", `/v1/orgs/${orgId}/members/${m.id}`, {
      token: owner.access_token,
      idem: idem(),
      body: { role: "member" },
    });
    assert.equal(down.json.role, "member");
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/members`, { token: m.access_token })).status, 403);
    const changes = await audit("member.role_changed", m.id);
    assert.deepEqual(
      changes.map((c) => c.details),
      [
        { from: "member", to: "owner" },
        { from: "owner", to: "member" },
      ],
    );

    const rm = await s.call("DELETE", `/v1/orgs/${orgId}/members/${m.id}`, { token: owner.access_token, idem: idem() });
    assert.equal(rm.status, 204, rm.text);
    // At once: the JWT, the API key and the refresh token stop working for this org.
    assert.equal((await s.call("GET", "/v1/users/me", { token: m.access_token })).status, 401);
    assert.equal((await s.call("GET", "/v1/users/me", { token: key.json.raw_key })).status, 401);
    const refresh = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: m.refresh_token } });
    assert.equal(refresh.status, 401);
    assert.equal(
      (await s.call("POST", "/v1/auth/login", { body: { email: m.email, password: "member-password-1" } })).status,
      401,
    );
    const families = await s.identity.db
      .selectFrom("refresh_token_families")
      .select("revoked_at")
      .where("user_id", "=", m.id)
      .execute();
    assert.ok(families.length > 0 && families.every((f) => f.revoked_at));
    const removed = await audit("member.removed", m.id);
    assert.equal(removed.length, 1);
    assert.equal(removed[0]!.details.api_keys_deleted, 1);
    // Gone from the list; removing again is 404.
    assert.ok(
      !(await s.call("GET", `/v1/orgs/${orgId}/members`, { token: owner.access_token })).json.some(
        (x: { user_id: string }) => x.user_id === m.id,
      ),
    );
    assert.equal(
      (await s.call("DELETE", `/v1/orgs/${orgId}/members/${m.id}`, { token: owner.access_token, idem: idem() })).status,
      404,
    );

    // Invited again, the old key stays dead (deleted at removal, not merely unverifiable).
    const back = await invite(m.email);
    assert.equal((await accept({ token: back.json.token, password: "member-password-1" })).status, 200);
    assert.equal((await s.call("GET", "/v1/users/me", { token: key.json.raw_key })).status, 401);
  });

  test("the last owner can be neither demoted nor removed (409 last_owner); with two owners, one may go", async () => {
    const other = await s.call("POST", "/v1/orgs", {
      token: owner.access_token,
      idem: idem(),
      body: { name: `Solo ${n++}` },
    });
    const sw = await s.call("POST", "/v1/auth/switch-org", {
      token: owner.access_token,
      idem: idem(),
      body: { org_id: other.json.id },
    });
    const t = sw.json.access_token as string;
    const demote = await s.call("PATCH", `/v1/orgs/${other.json.id}/members/${ownerId}`, {
      token: t,
      idem: idem(),
      body: { role: "member" },
    });
    assert.equal(demote.status, 409);
    assert.equal(demote.json.code, "last_owner");
    const remove = await s.call("DELETE", `/v1/orgs/${other.json.id}/members/${ownerId}`, { token: t, idem: idem() });
    assert.equal(remove.status, 409);
    assert.equal(remove.json.code, "last_owner");

    // Two owners removing each other at once: one succeeds, the other finds itself the last.
    const second = await s.identity.users.create({ email: email(), name: "Second", password: "second-password" });
    await s.identity.db
      .insertInto("memberships")
      .values({ user_id: second.id, org_id: other.json.id, role: "owner" })
      .execute();
    const secondJwt = (await s.identity.jwt.issue(second.id, other.json.id, 600)).token;
    const [a, b] = await Promise.all([
      s.call("DELETE", `/v1/orgs/${other.json.id}/members/${second.id}`, { token: t, idem: idem() }),
      s.call("DELETE", `/v1/orgs/${other.json.id}/members/${ownerId}`, { token: secondJwt, idem: idem() }),
    ]);
    const statuses = [a.status, b.status].sort();
    assert.ok(
      JSON.stringify(statuses) === "[204,409]" || JSON.stringify(statuses) === "[204,401]",
      `one removal wins: ${a.status} ${a.text} / ${b.status} ${b.text}`,
    );
    const owners = await s.identity.db
      .selectFrom("memberships")
      .select("user_id")
      .where("org_id", "=", other.json.id)
      .where("role", "=", "owner")
      .execute();
    assert.equal(owners.length, 1);
  });

  test("bad input on members: a malformed user id 400, an unknown one 404, a bad role 400", async () => {
    const t = owner.access_token;
    assert.equal((await s.call("DELETE", `/v1/orgs/${orgId}/members/xyz`, { token: t, idem: idem() })).status, 400);
    const unknown = await s.call("DELETE", `/v1/orgs/${orgId}/members/00000000-0000-4000-8000-000000000000`, {
      token: t,
      idem: idem(),
    });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.code, "resource_not_found");
    const role = await s.call("PATCH", `/v1/orgs/${orgId}/members/${ownerId}`, {
      token: t,
      idem: idem(),
      body: { role: "boss" },
    });
    assert.equal(role.status, 400);
    assert.equal(role.json.code, "invalid_request");
  });
});
