import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { IdentityRestCode } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import { createFixture, type Fixture } from "../testing/fixture.ts";
import { errorInfo, routerClients } from "../testing/router.ts";
import { allRules } from "./policies.ts";

let f: Fixture;
let c: ReturnType<typeof routerClients>;
let handlerRuns = 0;
before(async () => {
  f = await createFixture();
  // Counts executions of the CreateAPIKey business logic.
  const create = f.identity.apiKeys.create.bind(f.identity.apiKeys);
  f.identity.apiKeys.create = (...args) => {
    handlerRuns++;
    return create(...args);
  };
  c = routerClients(f.identity);
});
after(() => f.close());

const auth = (token: string, idem?: string) => ({
  headers: { authorization: `Bearer ${token}`, ...(idem ? { "idempotency-key": idem } : {}) },
});

async function fails(p: Promise<unknown>, code: Code, reason: string) {
  const err = await p.then(
    () => assert.fail(`expected ${reason}`),
    (e: unknown) => e,
  );
  const info = errorInfo(err);
  assert.equal(info.code, code, `code ${Code[info.code]} (${info.reason})`);
  assert.equal(info.reason, reason);
  return info;
}

test("every RPC of the four services has a policy", () => {
  const rules = allRules();
  for (const s of [SessionService, UserService, OrgService, AuthService]) {
    for (const m of s.methods) assert.ok(rules[`${s.typeName}/${m.name}`], `${s.typeName}/${m.name}`);
  }
});

describe("auth middleware", () => {
  test("missing, malformed and invalid credentials are 401 unauthenticated", async () => {
    await fails(c.users.getMe({}), Code.Unauthenticated, IdentityRestCode.unauthenticated);
    await fails(
      c.users.getMe({}, { headers: { authorization: "Basic abc" } }),
      Code.Unauthenticated,
      IdentityRestCode.unauthenticated,
    );
    await fails(c.users.getMe({}, auth("not.a.jwt")), Code.Unauthenticated, IdentityRestCode.unauthenticated);
    await fails(c.users.getMe({}, auth("sk_live_bogus")), Code.Unauthenticated, IdentityRestCode.unauthenticated);
  });

  test("users/me, api_keys list and GET org accept a JWT or an API key", async () => {
    const u = await f.seedUser();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    for (const cred of [await u.jwt(), key.rawKey]) {
      const me = await c.users.getMe({}, auth(cred));
      assert.equal(me.user!.id, u.user.id);
      assert.equal(me.user!.email, u.email);
      assert.ok(me.user!.createdAt);
      const keys = await c.users.listAPIKeys({}, auth(cred));
      assert.deepEqual(
        keys.apiKeys.map((k) => k.id),
        [key.id],
      );
      assert.equal((await c.orgs.getOrg({ id: u.orgId }, auth(cred))).org!.id, u.orgId);
    }
  });

  test("creating and revoking API keys is JWT only: an API key cannot create a key", async () => {
    const u = await f.seedUser();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    await fails(
      c.users.createAPIKey({ name: "x" }, auth(key.rawKey, "k1")),
      Code.PermissionDenied,
      IdentityRestCode.insufficientRole,
    );
    await fails(
      c.users.revokeAPIKey({ id: key.id }, auth(key.rawKey, "k2")),
      Code.PermissionDenied,
      IdentityRestCode.insufficientRole,
    );
    const made = await c.users.createAPIKey({ name: "x" }, auth(await u.jwt(), "k3"));
    assert.match(made.rawKey, /^sk_live_/);
  });

  test("owner-only RPCs refuse members (403 insufficient_role) and API keys", async () => {
    const owner = await f.seedUser({ role: "owner" });
    const member = await f.seedUser({ role: "member", orgId: owner.orgId });
    const mjwt = await member.jwt();
    await fails(
      c.sessions.revokeAll({ userId: owner.user.id }, auth(mjwt, "a")),
      Code.PermissionDenied,
      IdentityRestCode.insufficientRole,
    );
    await fails(
      c.orgs.updateOrg({ id: owner.orgId, name: "x" }, auth(mjwt, "b")),
      Code.PermissionDenied,
      IdentityRestCode.insufficientRole,
    );
    const okey = await f.identity.apiKeys.create(owner.ctx(), { name: "k" });
    await fails(
      c.orgs.updateOrg({ id: owner.orgId, name: "x" }, auth(okey.rawKey, "c")),
      Code.PermissionDenied,
      IdentityRestCode.insufficientRole,
    );
    // Role is read from the current membership: promoting the member takes effect on the same token.
    await f.identity.memberships.setRole(member.user.id, owner.orgId, "owner");
    assert.equal((await c.orgs.updateOrg({ id: owner.orgId, name: "Renamed" }, auth(mjwt, "d"))).org!.name, "Renamed");
  });

  test("login, refresh and logout need neither credential nor Idempotency-Key", async () => {
    const u = await f.seedUser();
    const { token } = await c.sessions.login({ email: u.email, password: u.password });
    const next = await c.sessions.refresh({ refreshToken: token!.refreshToken });
    await c.sessions.logout({ refreshToken: next.token!.refreshToken });
    await c.sessions.logout({});
  });
});

describe("orgs", () => {
  test("GET org: 404 resource_not_found for any org but the caller's; bad UUID 400", async () => {
    const u = await f.seedUser();
    const other = await f.seedUser();
    const jwt = await u.jwt();
    await fails(c.orgs.getOrg({ id: other.orgId }, auth(jwt)), Code.NotFound, IdentityRestCode.resourceNotFound);
    await fails(
      c.orgs.getOrg({ id: "00000000-0000-4000-8000-000000000000" }, auth(jwt)),
      Code.NotFound,
      IdentityRestCode.resourceNotFound,
    );
    await fails(c.orgs.getOrg({ id: "nope" }, auth(jwt)), Code.InvalidArgument, IdentityRestCode.invalidRequest);
  });

  test("PATCH org: omitted fields unchanged, slug conflict 409, invalid values 400", async () => {
    const u = await f.seedUser();
    const other = await f.seedUser();
    const jwt = await u.jwt();
    const before_ = (await c.orgs.getOrg({ id: u.orgId }, auth(jwt))).org!;
    const renamed = (await c.orgs.updateOrg({ id: u.orgId, name: "New Name" }, auth(jwt, "p1"))).org!;
    assert.equal(renamed.name, "New Name");
    assert.equal(renamed.slug, before_.slug);
    const reslugged = (await c.orgs.updateOrg({ id: u.orgId, slug: "fresh-slug-1" }, auth(jwt, "p2"))).org!;
    assert.equal(reslugged.name, "New Name");
    assert.equal(reslugged.slug, "fresh-slug-1");
    const otherSlug = (await f.identity.orgs.getForCaller(other.ctx(), other.orgId)).slug;
    await fails(
      c.orgs.updateOrg({ id: u.orgId, slug: otherSlug }, auth(jwt, "p3")),
      Code.AlreadyExists,
      "already_exists",
    );
    await fails(
      c.orgs.updateOrg({ id: u.orgId, slug: "Bad Slug" }, auth(jwt, "p4")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
    await fails(
      c.orgs.updateOrg({ id: u.orgId, name: "" }, auth(jwt, "p5")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
    await fails(
      c.orgs.updateOrg({ id: other.orgId, name: "x" }, auth(jwt, "p6")),
      Code.NotFound,
      IdentityRestCode.resourceNotFound,
    );
  });
});

describe("API keys", () => {
  test("raw_key returned once, never stored; revoked key stops at once and leaves the list", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    const made = await c.users.createAPIKey({ name: "deploy", env: "test" }, auth(jwt, "mk"));
    assert.match(made.rawKey, /^sk_test_[0-9A-Za-z]{49}$/);
    assert.ok(made.rawKey.startsWith(made.keyPrefix));
    assert.equal(made.env, "test");
    const rows = await f.identity.db.selectFrom("api_keys").selectAll().where("id", "=", made.id).execute();
    assert.ok(
      !JSON.stringify(rows, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v)).includes(
        made.rawKey.slice(16),
      ),
    );
    const listed = await c.users.listAPIKeys({}, auth(jwt));
    assert.ok(!JSON.stringify(listed, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes(made.rawKey));
    assert.equal((await c.users.getMe({}, auth(made.rawKey))).user!.id, u.user.id);
    await c.users.revokeAPIKey({ id: made.id }, auth(jwt, "rk"));
    await fails(c.users.getMe({}, auth(made.rawKey)), Code.Unauthenticated, IdentityRestCode.unauthenticated);
    assert.deepEqual((await c.users.listAPIKeys({}, auth(jwt))).apiKeys, []);
    await fails(
      c.users.revokeAPIKey({ id: made.id }, auth(jwt, "rk2")),
      Code.NotFound,
      IdentityRestCode.resourceNotFound,
    );
    await fails(
      c.users.revokeAPIKey({ id: "x" }, auth(jwt, "rk3")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
  });

  test("create validates name, env and expires_at", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    await fails(
      c.users.createAPIKey({ name: "" }, auth(jwt, "v1")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
    await fails(
      c.users.createAPIKey({ name: "a", env: "prod" }, auth(jwt, "v2")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
    await fails(
      c.users.createAPIKey({ name: "a", expiresAt: { seconds: 1000n } }, auth(jwt, "v3")),
      Code.InvalidArgument,
      IdentityRestCode.invalidRequest,
    );
    const made = await c.users.createAPIKey(
      { name: "a", expiresAt: { seconds: BigInt(Math.floor(Date.now() / 1000) + 3600) } },
      auth(jwt, "v4"),
    );
    assert.ok(made.expiresAt);
    assert.equal(made.env, "live");
  });
});

describe("Idempotency-Key", () => {
  test("missing → 400 idempotency_key_required on every mutating RPC but login/refresh/logout", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    await fails(
      c.users.createAPIKey({ name: "a" }, auth(jwt)),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyRequired,
    );
    await fails(
      c.users.revokeAPIKey({ id: "00000000-0000-4000-8000-000000000000" }, auth(jwt)),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyRequired,
    );
    await fails(
      c.orgs.updateOrg({ id: u.orgId, name: "n" }, auth(jwt)),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyRequired,
    );
    await fails(
      c.sessions.revokeAll({ userId: u.user.id }, auth(jwt)),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyRequired,
    );
  });

  test("replay returns the stored response without running the handler, with Idempotent-Replayed: true", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    const runs = handlerRuns;
    const first = await c.users.createAPIKey({ name: "once" }, auth(jwt, "replay-1"));
    let replayed: string | null = null;
    const second = await c.users.createAPIKey(
      { name: "once" },
      { ...auth(jwt, "replay-1"), onHeader: (h) => (replayed = h.get("idempotent-replayed")) },
    );
    assert.equal(replayed, "true");
    assert.equal(second.rawKey, first.rawKey);
    assert.equal(second.id, first.id);
    assert.equal(handlerRuns - runs, 1);
    assert.equal((await c.users.listAPIKeys({}, auth(jwt))).apiKeys.length, 1);
  });

  test("same key with a different request → 422 idempotency_key_mismatch", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    await c.users.createAPIKey({ name: "a" }, auth(jwt, "mm"));
    const info = await fails(
      c.users.createAPIKey({ name: "b" }, auth(jwt, "mm")),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyMismatch,
    );
    assert.equal(info.metadata.http_status, "422");
    await fails(
      c.orgs.updateOrg({ id: u.orgId, name: "a" }, auth(jwt, "mm")),
      Code.InvalidArgument,
      IdentityRestCode.idempotencyKeyMismatch,
    );
  });

  test("keys are scoped to the caller: another user's same key runs separately", async () => {
    const a = await f.seedUser();
    const b = await f.seedUser();
    const ka = await c.users.createAPIKey({ name: "same" }, auth(await a.jwt(), "shared-key"));
    const kb = await c.users.createAPIKey({ name: "same" }, auth(await b.jwt(), "shared-key"));
    assert.notEqual(ka.id, kb.id);
  });

  test("a failed request releases the key; a replay after 24 h runs again", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    await fails(
      c.users.revokeAPIKey({ id: "00000000-0000-4000-8000-000000000000" }, auth(jwt, "fail-1")),
      Code.NotFound,
      IdentityRestCode.resourceNotFound,
    );
    const made = await c.users.createAPIKey({ name: "k" }, auth(jwt, "late"));
    await c.users.revokeAPIKey({ id: made.id }, auth(jwt, "fail-1"));
    f.clock.advance(25 * 3600 * 1000);
    try {
      const again = await c.users.createAPIKey({ name: "k" }, auth(await u.jwt(), "late"));
      assert.notEqual(again.id, made.id);
    } finally {
      f.clock.reset();
    }
  });

  test("same key while the first request still runs → 409 idempotency_key_in_use; afterwards a replay", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    const create = f.identity.apiKeys.create;
    let entered!: () => void;
    let release!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    const gate = new Promise<void>((r) => (release = r));
    f.identity.apiKeys.create = async (...args) => {
      entered();
      await gate;
      return create(...args);
    };
    try {
      const first = c.users.createAPIKey({ name: "slow" }, auth(jwt, "in-use"));
      await inHandler;
      await fails(
        c.users.createAPIKey({ name: "slow" }, auth(jwt, "in-use")),
        Code.AlreadyExists,
        IdentityRestCode.idempotencyKeyInUse,
      );
      release();
      const done = await first;
      f.identity.apiKeys.create = create;
      const replay = await c.users.createAPIKey({ name: "slow" }, auth(jwt, "in-use"));
      assert.equal(replay.id, done.id);
    } finally {
      release();
      f.identity.apiKeys.create = create;
    }
  });

  test("50 concurrent identical requests run the handler exactly once", async () => {
    const u = await f.seedUser();
    const jwt = await u.jwt();
    const runs = handlerRuns;
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => c.users.createAPIKey({ name: "burst" }, auth(jwt, "burst-key"))),
    );
    assert.equal(handlerRuns - runs, 1);
    const ok = results.filter((r) => r.status === "fulfilled") as PromiseFulfilledResult<{ id: string }>[];
    const failed = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
    assert.ok(ok.length >= 1);
    assert.equal(new Set(ok.map((r) => r.value.id)).size, 1);
    for (const r of failed) assert.equal(errorInfo(r.reason).reason, IdentityRestCode.idempotencyKeyInUse);
    const keys = await f.identity.db.selectFrom("api_keys").select("id").where("user_id", "=", u.user.id).execute();
    assert.equal(keys.length, 1);
  });
});
