// Issue 19 item 4: API keys owned by the organization, through the real
// server (REST on its port, VerifyAPIKey on the internal gRPC port). An owner
// creates one; it survives its creator's removal from the org (a personal
// key of theirs does not); it verifies as itself (user_id = the key's id,
// org_key, role member), never as the person who made it; owners list and
// revoke it; a member cannot; each change is in the audit log.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { AuthMode, AuthService, Role } from "@platform/gen/identity/v1/auth_pb";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let owner: string;
let orgId: string;
let ownerId: string;
let grpc: ReturnType<typeof createClient<typeof AuthService>>;
before(async () => {
  s = await startTestServer();
  owner = (await s.login()).access_token;
  ownerId = (await s.call("GET", "/v1/users/me", { token: owner })).json.id;
  orgId = JSON.parse(Buffer.from(owner.split(".")[1]!, "base64url").toString()).org_id;
  grpc = createClient(AuthService, s.grpcTransport("agents"));
});
after(() => s.close());

let n = 0;
const idem = () => `idem-${process.pid}-${Date.now()}-${n++}`;

async function createKey(token: string, body: Record<string, unknown>) {
  return s.call("POST", "/v1/users/me/api_keys", { token, idem: idem(), body: { name: `key-${n++}`, ...body } });
}

/** A person invited into the owner's org with `role`, signed in. */
async function newPerson(role: "owner" | "member") {
  const email = `org-keys-${process.pid}-${n++}@example.com`;
  const inv = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
    token: owner,
    idem: idem(),
    body: { email, role },
  });
  assert.equal(inv.status, 201, inv.text);
  const acc = await s.call("POST", "/v1/invitations/accept", {
    body: { token: inv.json.token, password: "person-password-1", name: "P" },
  });
  assert.equal(acc.status, 200, acc.text);
  const token = acc.json.access_token as string;
  return { token, id: (await s.call("GET", "/v1/users/me", { token })).json.id as string };
}

async function audit(action: string, targetId: string) {
  return s.identity.db
    .selectFrom("audit_events")
    .selectAll()
    .where("org_id", "=", orgId)
    .where("action", "=", action)
    .where("target_id", "=", targetId)
    .execute();
}

describe("organization API keys", () => {
  test("an owner creates one; it outlives its creator's removal, a personal key of theirs does not", async () => {
    const creator = await newPerson("owner");
    const orgKey = await createKey(creator.token, { org: true, scopes: ["read", "sessions:run"] });
    assert.equal(orgKey.status, 201, orgKey.text);
    assert.equal(orgKey.json.org, true);
    assert.deepEqual(orgKey.json.scopes, ["read", "sessions:run"]);
    const personal = await createKey(creator.token, {});
    assert.equal(personal.status, 201, personal.text);
    assert.ok(!personal.json.org, "a personal key (false is omitted from JSON)");

    // Before: both verify; the org key as itself, not as its creator.
    const ctx = (await grpc.verifyAPIKey({ apiKey: orgKey.json.raw_key })).context!;
    assert.equal(ctx.orgKey, true);
    assert.equal(ctx.userId, orgKey.json.id);
    assert.equal(ctx.apiKeyId, orgKey.json.id);
    assert.notEqual(ctx.userId, creator.id);
    assert.equal(ctx.orgId, orgId);
    assert.equal(ctx.mode, AuthMode.API_KEY);
    assert.equal(ctx.role, Role.MEMBER);
    assert.deepEqual(ctx.scopes, ["read", "sessions:run"]);
    const personalCtx = (await grpc.verifyAPIKey({ apiKey: personal.json.raw_key })).context!;
    assert.equal(personalCtx.orgKey, false);
    assert.equal(personalCtx.userId, creator.id);

    const removed = await s.call("DELETE", `/v1/orgs/${orgId}/members/${creator.id}`, { token: owner, idem: idem() });
    assert.equal(removed.status, 204, removed.text);

    // After: the org key still verifies (gRPC and identity's own REST), the personal one does not.
    const still = (await grpc.verifyAPIKey({ apiKey: orgKey.json.raw_key })).context!;
    assert.equal(still.userId, orgKey.json.id);
    assert.equal(still.orgKey, true);
    const token = (await grpc.verifyToken({ token: `Bearer ${orgKey.json.raw_key}` })).context!;
    assert.equal(token.orgKey, true);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}`, { token: orgKey.json.raw_key })).status, 200);
    await assert.rejects(grpc.verifyAPIKey({ apiKey: personal.json.raw_key }));
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}`, { token: personal.json.raw_key })).status, 401);
    // It is no user: /v1/users/me is not the creator's profile.
    const me = await s.call("GET", "/v1/users/me", { token: orgKey.json.raw_key });
    assert.equal(me.status, 404, me.text);
    assert.equal(me.json.code, "resource_not_found");
    assert.ok(!me.text.includes(creator.id));

    const removal = await audit("member.removed", creator.id);
    assert.equal(removal.length, 1);
    assert.equal(removal[0]!.details.api_keys_deleted, 1, "only the personal key went with the member");
  });

  test("owners list and revoke them; a revoked one stops verifying at once; audit entries for both", async () => {
    const k = await createKey(owner, { org: true, scopes: ["read"] });
    assert.equal(k.status, 201, k.text);
    const list = await s.call("GET", `/v1/orgs/${orgId}/api_keys`, { token: owner });
    assert.equal(list.status, 200, list.text);
    const item = list.json.find((x: { id: string }) => x.id === k.json.id);
    assert.ok(item, list.text);
    assert.equal(item.org, true);
    assert.equal(item.created_by, ownerId);
    assert.deepEqual(item.scopes, ["read"]);
    assert.ok(!list.text.includes(k.json.raw_key), "list shows no raw key");
    assert.ok(
      list.json.every((x: { org: boolean }) => x.org),
      "only the org's keys",
    );
    // The owner's own list stays the keys they own.
    const mine = await s.call("GET", "/v1/users/me/api_keys", { token: owner });
    assert.ok(!mine.json.some((x: { id: string }) => x.id === k.json.id));
    // Revoking it as a personal key is 404; as an org key it works.
    assert.equal(
      (await s.call("POST", `/v1/users/me/api_keys/${k.json.id}/revoke`, { token: owner, idem: idem() })).status,
      404,
    );
    const revoked = await s.call("POST", `/v1/orgs/${orgId}/api_keys/${k.json.id}/revoke`, {
      token: owner,
      idem: idem(),
    });
    assert.equal(revoked.status, 204, revoked.text);
    await assert.rejects(grpc.verifyAPIKey({ apiKey: k.json.raw_key }));
    const again = await s.call("GET", `/v1/orgs/${orgId}/api_keys`, { token: owner });
    assert.ok(!again.json.some((x: { id: string }) => x.id === k.json.id));
    assert.equal(
      (await s.call("POST", `/v1/orgs/${orgId}/api_keys/${k.json.id}/revoke`, { token: owner, idem: idem() })).status,
      404,
    );

    const created = await audit("api_key.created", k.json.id);
    assert.equal(created.length, 1);
    assert.equal(created[0]!.actor_user_id, ownerId);
    assert.equal(created[0]!.details.owner, "org");
    assert.ok(!JSON.stringify(created).includes(k.json.raw_key));
    const revokedEntry = await audit("api_key.revoked", k.json.id);
    assert.equal(revokedEntry.length, 1);
    assert.equal(revokedEntry[0]!.details.owner, "org");
  });

  test("a member can neither create, list nor revoke them (403 insufficient_role); nor can a key; another org is 404", async () => {
    const member = await newPerson("member");
    const refused = await createKey(member.token, { org: true });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.json.code, "insufficient_role");
    // A member's personal key is still fine.
    assert.equal((await createKey(member.token, {})).status, 201);
    const k = await createKey(owner, { org: true, scopes: ["read", "agents:write", "sessions:run", "admin"] });
    assert.equal(
      (await s.call("GET", `/v1/orgs/${orgId}/api_keys`, { token: member.token })).json.code,
      "insufficient_role",
    );
    const rev = await s.call("POST", `/v1/orgs/${orgId}/api_keys/${k.json.id}/revoke`, {
      token: member.token,
      idem: idem(),
    });
    assert.equal(rev.status, 403);
    assert.equal(rev.json.code, "insufficient_role");
    // An API key (even the org's own, with admin) cannot manage keys.
    const byKey = await s.call("GET", `/v1/orgs/${orgId}/api_keys`, { token: k.json.raw_key });
    assert.equal(byKey.status, 403);
    assert.equal(byKey.json.code, "insufficient_role");
    const other = await s.call("GET", "/v1/orgs/00000000-0000-4000-8000-000000000000/api_keys", { token: owner });
    assert.equal(other.status, 404);
    assert.equal(other.json.code, "resource_not_found");
    // Still valid after all that.
    assert.equal((await grpc.verifyAPIKey({ apiKey: k.json.raw_key })).context!.orgKey, true);
  });
});

describe("the admin scope", () => {
  const members = `/v1/orgs/${"{org}"}/members`;
  const path = (p: string) => p.replace("{org}", orgId);

  test("an organization key or an owner's key with admin manages members and reads the audit log", async () => {
    const orgKey = (await createKey(owner, { org: true, scopes: ["admin"] })).json;
    const ownersKey = (await createKey(owner, { scopes: ["admin"] })).json.raw_key as string;
    for (const token of [orgKey.raw_key as string, ownersKey]) {
      const list = await s.call("GET", path(members), { token });
      assert.equal(list.status, 200, list.text);
      assert.ok(
        list.json.some((m: { user_id: string }) => m.user_id === ownerId),
        list.text,
      );
    }
    const email = `admin-key-${process.pid}-${n++}@example.com`;
    const inv = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
      token: orgKey.raw_key,
      idem: idem(),
      body: { email, role: "member" },
    });
    assert.equal(inv.status, 201, inv.text);
    const acc = await s.call("POST", "/v1/invitations/accept", {
      body: { token: inv.json.token, password: "person-password-1", name: "Invited by a key" },
    });
    assert.equal(acc.status, 200, acc.text);
    const invitee = (await s.call("GET", "/v1/users/me", { token: acc.json.access_token })).json.id as string;
    const removal = await s.call("DELETE", `/v1/orgs/${orgId}/members/${invitee}`, {
      token: orgKey.raw_key,
      idem: idem(),
    });
    assert.equal(removal.status, 204, removal.text);
    const log = await s.call("GET", `/v1/orgs/${orgId}/audit_events?action=member.`, { token: orgKey.raw_key });
    assert.equal(log.status, 200, log.text);
    const removed = log.json.items.find(
      (e: { action: string; target_id: string }) => e.action === "member.removed" && e.target_id === invitee,
    );
    assert.ok(removed, log.text);
    // The actor is the key, which names no user.
    assert.equal(removed.actor_api_key_id, orgKey.id, JSON.stringify(removed));
    assert.ok(!removed.actor_user_id, JSON.stringify(removed));
  });

  test("without admin a key is insufficient_scope; a member's key with admin is insufficient_role", async () => {
    const reader = (await createKey(owner, { org: true, scopes: ["read", "agents:write", "sessions:run"] })).json;
    for (const [method, p] of [
      ["GET", members],
      ["GET", `/v1/orgs/{org}/invitations`],
      ["GET", `/v1/orgs/{org}/audit_events`],
    ] as const) {
      const r = await s.call(method, path(p), { token: reader.raw_key });
      assert.equal(r.status, 403, `${p}: ${r.text}`);
      assert.equal(r.json.code, "insufficient_scope", `${p}: ${r.text}`);
    }
    const member = await newPerson("member");
    const membersKey = (await createKey(member.token, { scopes: ["read", "admin"] })).json.raw_key as string;
    const r = await s.call("GET", path(members), { token: membersKey });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.code, "insufficient_role");
  });

  test("the specification's owner routes and key management stay a person's: admin keys get insufficient_role", async () => {
    const admin = (await createKey(owner, { org: true, scopes: ["read", "admin"] })).json.raw_key as string;
    const calls: Array<[string, string, unknown?]> = [
      ["PATCH", `/v1/orgs/${orgId}`, { name: "Renamed by a key" }],
      ["POST", "/v1/auth/revoke-all", { user_id: ownerId }],
      ["GET", `/v1/orgs/${orgId}/api_keys`],
      ["POST", "/v1/users/me/api_keys", { name: "made by a key" }],
    ];
    for (const [method, p, body] of calls) {
      const r = await s.call(method, p, { token: admin, idem: idem(), ...(body ? { body } : {}) });
      assert.equal(r.status, 403, `${method} ${p}: ${r.text}`);
      assert.equal(r.json.code, "insufficient_role", `${method} ${p}: ${r.text}`);
    }
  });
});
