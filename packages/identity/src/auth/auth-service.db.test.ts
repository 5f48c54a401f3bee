import assert from "node:assert/strict";
import { createPublicKey } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { AuthReason } from "@platform/errors";
import { AuthMode, Env, Role } from "@platform/gen/identity/v1/auth_pb";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { createFixture, type Fixture } from "../testing/fixture.ts";
import { errorInfo, routerClients } from "../testing/router.ts";
import { JwtService } from "../tokens/jwt-service.ts";

let f: Fixture;
let c: ReturnType<typeof routerClients>;
before(async () => {
  f = await createFixture();
  c = routerClients(f.identity);
});
after(() => f.close());

async function fails(p: Promise<unknown>, code: Code, reason: string) {
  const err = await p.then(
    () => assert.fail(`expected ${reason}`),
    (e: unknown) => e,
  );
  const info = errorInfo(err);
  assert.equal(info.code, code, `code ${Code[info.code]} (${info.reason})`);
  assert.equal(info.reason, reason);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("IssueJWT", () => {
  test("claims exactly per the table; kid in the header; env test when ENV is not prod", async () => {
    const u = await f.seedUser();
    const res = await c.auth.issueJWT({ userId: u.user.id, orgId: u.orgId, ttl: { seconds: 600n } });
    const header = decodeProtectedHeader(res.accessToken);
    assert.equal(header.alg, "RS256");
    assert.equal(header.kid, res.kid);
    assert.equal(header.kid, await f.identity.keys.ensureActiveKey());
    const claims = decodeJwt(res.accessToken);
    assert.deepEqual(Object.keys(claims).sort(), [
      "aud",
      "env",
      "exp",
      "iat",
      "iss",
      "jti",
      "nbf",
      "org_id",
      "scope",
      "sub",
    ]);
    assert.equal(claims.iss, "identity.platform");
    assert.equal(claims.sub, u.user.id);
    assert.deepEqual(claims.aud, ["agents", "identity"]);
    assert.equal(claims.nbf, claims.iat);
    assert.equal(claims.exp! - claims.iat!, 600);
    assert.match(String(claims.jti), UUID);
    assert.equal(claims.jti, res.jti);
    assert.equal(claims.org_id, u.orgId);
    assert.equal(claims.env, "test");
    assert.equal(claims.scope, "default");
    assert.equal(res.expiresIn, 600n);
    assert.ok(Math.abs(Number(res.expiresAt!.seconds) - claims.exp!) <= 1);
  });

  test("ENV=prod stamps env live", async () => {
    const u = await f.seedUser();
    const prod = new JwtService(f.identity.keys, f.identity.memberships, f.identity.caches, { env: "live" });
    assert.equal(decodeJwt((await prod.issue(u.user.id, u.orgId, 60)).token).env, "live");
  });

  test("TTL: 0 → 3600 s, over 24 h clamped to 24 h", async () => {
    const u = await f.seedUser();
    assert.equal((await c.auth.issueJWT({ userId: u.user.id, orgId: u.orgId })).expiresIn, 3600n);
    assert.equal((await c.auth.issueJWT({ userId: u.user.id, orgId: u.orgId, ttl: { seconds: 0n } })).expiresIn, 3600n);
    assert.equal(
      (await c.auth.issueJWT({ userId: u.user.id, orgId: u.orgId, ttl: { seconds: 7n * 86400n } })).expiresIn,
      86400n,
    );
  });

  test("PERMISSION_DENIED not_a_member without membership", async () => {
    const u = await f.seedUser();
    const other = await f.seedUser();
    await fails(
      c.auth.issueJWT({ userId: u.user.id, orgId: other.orgId }),
      Code.PermissionDenied,
      AuthReason.notAMember,
    );
  });
});

describe("VerifyJWT", () => {
  test("returns the AuthContext with the CURRENT membership role", async () => {
    const u = await f.seedUser({ role: "owner" });
    const token = await u.jwt();
    const ctx = (await c.auth.verifyJWT({ token })).context!;
    assert.equal(ctx.userId, u.user.id);
    assert.equal(ctx.orgId, u.orgId);
    assert.equal(ctx.mode, AuthMode.JWT);
    assert.equal(ctx.role, Role.OWNER);
    assert.equal(ctx.env, Env.TEST);
    assert.equal(ctx.authKeyId, decodeProtectedHeader(token).kid);
    assert.equal(ctx.apiKeyId, "");
    assert.equal(ctx.method, "jwt_session");
    await f.identity.memberships.setRole(u.user.id, u.orgId, "member");
    assert.equal((await c.auth.verifyJWT({ token })).context!.role, Role.MEMBER);
    await f.identity.memberships.remove(u.user.id, u.orgId);
    await fails(c.auth.verifyJWT({ token }), Code.Unauthenticated, AuthReason.noMembership);
  });

  test("expired → expired", async () => {
    const u = await f.seedUser();
    const token = await u.jwt();
    f.clock.advance(2 * 3600 * 1000);
    try {
      await fails(c.auth.verifyJWT({ token }), Code.Unauthenticated, AuthReason.expired);
    } finally {
      f.clock.reset();
    }
  });

  test("garbage → invalid_credentials", async () => {
    await fails(c.auth.verifyJWT({ token: "" }), Code.Unauthenticated, AuthReason.invalidCredentials);
    await fails(c.auth.verifyJWT({ token: "a.b.c" }), Code.Unauthenticated, AuthReason.invalidCredentials);
  });
});

describe("VerifyAPIKey and VerifyToken", () => {
  test("an API key verifies with method api_key:<prefix>; wrong_environment; no_membership; revoked and expired are invalid", async () => {
    const u = await f.seedUser({ role: "member" });
    const live = await f.identity.apiKeys.create(u.ctx(), { name: "ci" });
    const test_ = await f.identity.apiKeys.create(u.ctx(), { name: "t", env: "test" });
    const ctx = (await c.auth.verifyAPIKey({ apiKey: live.rawKey })).context!;
    assert.equal(ctx.mode, AuthMode.API_KEY);
    assert.equal(ctx.apiKeyId, live.id);
    assert.equal(ctx.authKeyId, "");
    assert.equal(ctx.method, `api_key:${live.keyPrefix}`);
    assert.equal(ctx.env, Env.LIVE);
    assert.equal(ctx.role, Role.MEMBER);
    assert.equal((await c.auth.verifyAPIKey({ apiKey: live.rawKey, requiredEnv: Env.LIVE })).context!.env, Env.LIVE);
    await fails(
      c.auth.verifyAPIKey({ apiKey: live.rawKey, requiredEnv: Env.TEST }),
      Code.Unauthenticated,
      AuthReason.wrongEnvironment,
    );
    await fails(
      c.auth.verifyAPIKey({ apiKey: test_.rawKey, requiredEnv: Env.LIVE }),
      Code.Unauthenticated,
      AuthReason.wrongEnvironment,
    );

    // last_used_at is recorded.
    const listed = await f.identity.apiKeys.list(u.ctx());
    assert.ok(listed.find((k) => k.id === live.id)?.lastUsedAt);

    // One changed character breaks the checksum; an unknown well-formed key is unknown.
    const flipped = live.rawKey.slice(0, -1) + (live.rawKey.endsWith("A") ? "B" : "A");
    await fails(c.auth.verifyAPIKey({ apiKey: flipped }), Code.Unauthenticated, AuthReason.invalidCredentials);
    await fails(c.auth.verifyAPIKey({ apiKey: "sk_live_nope" }), Code.Unauthenticated, AuthReason.invalidCredentials);

    const expiring = await f.identity.apiKeys.create(u.ctx(), {
      name: "soon",
      expiresAt: new Date(Date.now() + 60_000),
    });
    await c.auth.verifyAPIKey({ apiKey: expiring.rawKey });
    f.clock.advance(120_000);
    try {
      await fails(
        c.auth.verifyAPIKey({ apiKey: expiring.rawKey }),
        Code.Unauthenticated,
        AuthReason.invalidCredentials,
      );
    } finally {
      f.clock.reset();
    }

    await f.identity.apiKeys.revoke(u.ctx(), test_.id);
    await fails(c.auth.verifyAPIKey({ apiKey: test_.rawKey }), Code.Unauthenticated, AuthReason.invalidCredentials);

    await f.identity.memberships.remove(u.user.id, u.orgId);
    await fails(c.auth.verifyAPIKey({ apiKey: live.rawKey }), Code.Unauthenticated, AuthReason.noMembership);
  });

  test("VerifyToken detects JWT and API key, with or without Bearer", async () => {
    const u = await f.seedUser();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    const jwt = await u.jwt();
    assert.equal((await c.auth.verifyToken({ token: jwt })).context!.mode, AuthMode.JWT);
    assert.equal((await c.auth.verifyToken({ token: `Bearer ${jwt}` })).context!.mode, AuthMode.JWT);
    assert.equal((await c.auth.verifyToken({ token: key.rawKey })).context!.mode, AuthMode.API_KEY);
    assert.equal((await c.auth.verifyToken({ token: `bearer ${key.rawKey}` })).context!.apiKeyId, key.id);
    await fails(c.auth.verifyToken({ token: "" }), Code.Unauthenticated, AuthReason.invalidCredentials);
    await fails(c.auth.verifyToken({ token: "sk_test_garbage" }), Code.Unauthenticated, AuthReason.invalidCredentials);
  });
});

describe("VerifyToken of a cached session", () => {
  test("answers with one frozen AuthContext, and the same reply, call after call", async () => {
    const u = await f.seedUser();
    const { accessToken: jwt } = await c.auth.issueJWT({ userId: u.user.id, orgId: u.orgId });
    await f.identity.authenticator.verifyToken(jwt);
    const first = await f.identity.authenticator.verifyToken(jwt);
    const again = await f.identity.authenticator.verifyToken(jwt);
    assert.equal(again, first);
    assert.ok(Object.isFrozen(first));
    assert.equal(first.userId, u.user.id);
    const replies = [await c.auth.verifyToken({ token: jwt }), await c.auth.verifyToken({ token: jwt })];
    for (const r of replies) {
      assert.equal(r.context!.userId, u.user.id);
      assert.equal(r.context!.mode, AuthMode.JWT);
    }
  });
});

describe("GetPublicKey", () => {
  test("returns SPKI DER of the active kid; unknown and retired kids are NOT_FOUND kid_unknown", async () => {
    const kid = await f.identity.keys.ensureActiveKey();
    const res = await c.auth.getPublicKey({ kid });
    assert.equal(res.kid, kid);
    assert.equal(res.algorithm, "RS256");
    const key = createPublicKey({ key: Buffer.from(res.der), format: "der", type: "spki" });
    assert.equal(key.asymmetricKeyType, "rsa");
    await fails(
      c.auth.getPublicKey({ kid: "00000000-0000-4000-8000-000000000000" }),
      Code.NotFound,
      AuthReason.kidUnknown,
    );
    await fails(c.auth.getPublicKey({ kid: "" }), Code.NotFound, AuthReason.kidUnknown);
    const next = await f.identity.keys.rotate();
    assert.notEqual(next, kid);
    await fails(c.auth.getPublicKey({ kid }), Code.NotFound, AuthReason.kidUnknown);
    assert.equal((await c.auth.getPublicKey({ kid: next })).kid, next);
  });
});
