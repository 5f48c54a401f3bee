import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { testServerUrl } from "@platform/db/testing";
import { AuthReason, PlatformError } from "@platform/errors";
import { createIdentity, type Identity } from "../identity.ts";
import { createFixture, FAST_ARGON2, type Fixture } from "../testing/fixture.ts";
import { startTestServer } from "../testing/server.ts";
import type { InvalidationListener } from "./invalidation-listener.ts";

// Every verification cache must give way at once to the writes that make its
// answers wrong: in this process before the write returns, from other
// replicas (and hand-written SQL) as soon as their notification arrives.

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

async function reason(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => assert.fail("expected a rejection"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PlatformError, String(err));
  return err.reason;
}

/** Verifies twice, so the second answer comes from the caches when they are on. */
async function warm<T>(verify: () => Promise<T>): Promise<T> {
  await verify();
  return verify();
}

test("the caches are on: with PGlite from the start, with PostgreSQL once the change listener is in place", () => {
  assert.equal(f.identity.caches.enabled, true);
});

test("the service starts its change listener (PostgreSQL) and stops it on close", async () => {
  const server = await startTestServer();
  try {
    assert.equal(server.identity.caches.enabled, true);
  } finally {
    await server.app.close();
  }
  assert.equal(server.identity.caches.enabled, server.database.kind === "pglite");
});

describe("writes through this process invalidate before they return", () => {
  test("a revoked API key fails on the very next verify", async () => {
    const u = await f.seedUser();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    assert.equal((await warm(() => f.identity.authenticator.verifyApiKey(key.rawKey))).apiKeyId, key.id);
    await f.identity.apiKeys.revoke(u.ctx(), key.id);
    assert.equal(await reason(f.identity.authenticator.verifyApiKey(key.rawKey)), AuthReason.invalidCredentials);
    assert.equal(await reason(f.identity.authenticator.verifyToken(key.rawKey)), AuthReason.invalidCredentials);
  });

  test("a role change and a removed membership show on the next VerifyJWT and VerifyAPIKey", async () => {
    const u = await f.seedUser({ role: "owner" });
    const token = await u.jwt();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    assert.equal((await warm(() => f.identity.authenticator.verifyJwt(token))).role, "owner");
    assert.equal((await warm(() => f.identity.authenticator.verifyApiKey(key.rawKey))).role, "owner");
    await f.identity.memberships.setRole(u.user.id, u.orgId, "member");
    assert.equal((await f.identity.authenticator.verifyJwt(token)).role, "member");
    assert.equal((await f.identity.authenticator.verifyApiKey(key.rawKey)).role, "member");
    await f.identity.memberships.remove(u.user.id, u.orgId);
    assert.equal(await reason(f.identity.authenticator.verifyJwt(token)), AuthReason.noMembership);
    assert.equal(await reason(f.identity.authenticator.verifyApiKey(key.rawKey)), AuthReason.noMembership);
  });

  test("a verified token whose key is retired reports key_retired; GetPublicKey no longer serves the key", async () => {
    const u = await f.seedUser();
    const token = await u.jwt();
    const kid = (await warm(() => f.identity.authenticator.verifyJwt(token))).authKeyId!;
    await f.identity.keys.rotate();
    assert.equal(await reason(f.identity.authenticator.verifyJwt(token)), AuthReason.keyRetired);
    assert.equal(await reason(f.identity.keys.publicKeyDer(kid)), AuthReason.kidUnknown);
    const fresh = await u.jwt();
    assert.notEqual((await f.identity.authenticator.verifyJwt(fresh)).authKeyId, kid);
  });

  test("a cached verification still expires: JWT exp and API key expires_at follow the clock", async () => {
    const u = await f.seedUser();
    const token = (await f.identity.jwt.issue(u.user.id, u.orgId, 60)).token;
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k", expiresAt: new Date(Date.now() + 30_000) });
    await warm(() => f.identity.authenticator.verifyJwt(token));
    await warm(() => f.identity.authenticator.verifyApiKey(key.rawKey));
    f.clock.advance(45_000);
    try {
      assert.equal(await reason(f.identity.authenticator.verifyApiKey(key.rawKey)), AuthReason.invalidCredentials);
      await f.identity.authenticator.verifyJwt(token);
      f.clock.advance(30_000);
      assert.equal(await reason(f.identity.authenticator.verifyJwt(token)), AuthReason.expired);
    } finally {
      f.clock.reset();
    }
  });
});

test("last_used_at is written at most once a minute per key, not once per verification", async () => {
  const u = await f.seedUser();
  const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
  const lastUsed = async () => (await f.identity.apiKeys.list(u.ctx())).find((k) => k.id === key.id)!.lastUsedAt;
  assert.equal(await lastUsed(), null);
  try {
    await f.identity.authenticator.verifyApiKey(key.rawKey);
    const first = await lastUsed();
    assert.ok(first);
    f.clock.advance(30_000);
    await f.identity.authenticator.verifyApiKey(key.rawKey);
    assert.deepEqual(await lastUsed(), first);
    f.clock.advance(31_000);
    await f.identity.authenticator.verifyApiKey(key.rawKey);
    assert.ok((await lastUsed())!.getTime() >= first.getTime() + 60_000);
  } finally {
    f.clock.reset();
  }
});

/** Polls until `check` passes: a notification crosses PostgreSQL asynchronously. */
async function eventually(check: () => Promise<void>): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return await check();
    } catch (err) {
      if (i >= 200) throw err;
      await sleep(25);
    }
  }
}

describe("another replica's writes (PostgreSQL: LISTEN/NOTIFY)", { skip: !testServerUrl() }, () => {
  let replica: Identity;
  let listener: InvalidationListener;
  before(async () => {
    const url = (f.database as { url?: string }).url!;
    replica = createIdentity(f.database, {
      kek: f.kek,
      env: "dev",
      jwtTtlSeconds: 3600,
      refreshTokenTtlSeconds: 3600,
      argon2: FAST_ARGON2,
      idempotencyLockMs: 30_000,
    });
    listener = await replica.followChanges(url);
  });
  after(() => listener?.stop());

  test("revoke, role change, removal and rotation by the first replica reach the second one's caches", async () => {
    const u = await f.seedUser({ role: "owner" });
    const token = await u.jwt();
    const key = await f.identity.apiKeys.create(u.ctx(), { name: "k" });
    assert.equal((await warm(() => replica.authenticator.verifyJwt(token))).role, "owner");
    await warm(() => replica.authenticator.verifyApiKey(key.rawKey));

    await f.identity.apiKeys.revoke(u.ctx(), key.id);
    await eventually(async () =>
      assert.equal(await reason(replica.authenticator.verifyApiKey(key.rawKey)), AuthReason.invalidCredentials),
    );
    await f.identity.memberships.setRole(u.user.id, u.orgId, "member");
    await eventually(async () => assert.equal((await replica.authenticator.verifyJwt(token)).role, "member"));
    await f.identity.keys.rotate();
    await eventually(async () =>
      assert.equal(await reason(replica.authenticator.verifyJwt(token)), AuthReason.keyRetired),
    );
  });

  test("a membership deleted by hand in SQL reaches both replicas", async () => {
    const u = await f.seedUser();
    const token = await u.jwt();
    await warm(() => f.identity.authenticator.verifyJwt(token));
    await warm(() => replica.authenticator.verifyJwt(token));
    await f.identity.db.deleteFrom("memberships").where("user_id", "=", u.user.id).execute();
    for (const identity of [f.identity, replica]) {
      await eventually(async () =>
        assert.equal(await reason(identity.authenticator.verifyJwt(token)), AuthReason.noMembership),
      );
    }
  });

  test("without its listener a replica bypasses its caches, so a change is seen at once", async () => {
    const u = await f.seedUser({ role: "owner" });
    const token = await u.jwt();
    await warm(() => replica.authenticator.verifyJwt(token));
    await listener.stop();
    assert.equal(replica.caches.enabled, false);
    await f.identity.db.updateTable("memberships").set({ role: "member" }).where("user_id", "=", u.user.id).execute();
    assert.equal((await replica.authenticator.verifyJwt(token)).role, "member");
  });
});
