// A VerifyAPIKey of a key whose row and role are cached, with its
// last_used_at written less than a minute ago (every call of a busy client),
// is answered without an await: the only promise made is ApiKeys.verify's
// own. Revocation, expiry and a membership's end still show at once
// (auth-caches.db.test.ts); here, that the fast path answers what the slow
// one does and keeps no await on the way.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AuthReason, PlatformError } from "@platform/errors";
import { promisesMadeBy } from "@platform/rpc/testing/promise-count";
import { createFixture, type Fixture } from "../testing/fixture.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

test("a cached key verifies with one promise and the same answer", async () => {
  const u = await f.seedUser();
  const key = await f.identity.apiKeys.create(u.ctx(), { name: "fast" });
  const first = await f.identity.authenticator.verifyApiKey(key.rawKey); // reads the row and role, writes last_used_at
  // `made` counts the test's own await of the result too (two promises with async hooks on): 3 in all;
  // with an await per cache, per role and per last_used_at check it was 11 (9 for an org key).
  const { made, result } = await promisesMadeBy(() => f.identity.authenticator.verifyApiKey(key.rawKey));
  assert.deepEqual(result, first);
  assert.equal(result.apiKeyId, key.id);
  assert.ok(made <= 3, `a cached verify made ${made} promises`);
  const token = await promisesMadeBy(() => f.identity.authenticator.verifyToken(key.rawKey));
  assert.deepEqual(token.result, first);
  assert.ok(token.made <= 3, `a cached VerifyToken of an API key made ${token.made} promises`);
});

test("an organization's cached key verifies with one promise too", async () => {
  const owner = await f.seedUser({ role: "owner" });
  const key = await f.identity.apiKeys.create(owner.ctx(), { name: "org-fast", org: true });
  const first = await f.identity.authenticator.verifyApiKey(key.rawKey);
  const { made, result } = await promisesMadeBy(() => f.identity.authenticator.verifyApiKey(key.rawKey));
  assert.deepEqual(result, first);
  assert.equal(result.orgKey, true);
  assert.ok(made <= 3, `a cached org key verify made ${made} promises`);
});

test("refusals of the field stay rejections, not throws", async () => {
  const p = f.identity.authenticator.verifyApiKey("not a key");
  assert.ok(p instanceof Promise);
  const err = await p.then(
    () => assert.fail("expected a rejection"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PlatformError);
  assert.equal(err.reason, AuthReason.invalidCredentials);
  const wrongEnv = await f.seedUser();
  const test = await f.identity.apiKeys.create(wrongEnv.ctx(), { name: "t", env: "test" });
  await f.identity.authenticator.verifyApiKey(test.rawKey);
  const refused = await f.identity.authenticator.verifyApiKey(test.rawKey, "live").then(
    () => assert.fail("expected a rejection"),
    (e: unknown) => e as PlatformError,
  );
  assert.equal(refused.reason, AuthReason.wrongEnvironment);
});
