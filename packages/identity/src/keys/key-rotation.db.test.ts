// Issue 19 item 5: scheduled signing-key rotation, step by step on a clock
// given to each step: pending (published, verifies, does not sign) -> active
// -> retiring (verifies, published) -> retired (refused, as the spec says).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AuthReason } from "@platform/errors";
import { AuthCaches } from "../cache/auth-caches.ts";
import { createFixture, type Fixture } from "../testing/fixture.ts";
import { type RotationPolicy, SigningKeys } from "./signing-keys.ts";

const H = 3_600_000;
const policy: RotationPolicy = { intervalMs: 10 * H, prePublishMs: H, retentionMs: 2 * H };
const at = (t0: number, ms: number) => new Date(t0 + ms);

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

async function states(): Promise<Record<string, string>> {
  const rows = await f.identity.db.selectFrom("signing_keys").select(["kid", "state"]).execute();
  return Object.fromEntries(rows.map((r) => [r.kid, r.state]));
}
const publishedKids = async () => (await f.identity.keys.published()).map((k) => k.kid);

test("a step publishes the next key before it signs, switches after pre-publication, retires the old key after retention", async () => {
  const old = await f.identity.keys.ensureActiveKey();
  const t0 = Date.now();
  const user = await f.seedUser();
  const oldToken = await user.jwt();

  assert.deepEqual(
    await f.identity.keys.advanceRotation(policy, { now: at(t0, H) }),
    { retired: [] },
    "nothing due an hour in",
  );

  // Due: interval minus pre-publication after activation.
  const step = await f.identity.keys.advanceRotation(policy, { now: at(t0, 9 * H + 1000) });
  const next = step.published!;
  assert.ok(next);
  assert.deepEqual(await states(), { ...(await states()), [old]: "active", [next]: "pending" });
  assert.deepEqual(await publishedKids(), [next, old], "the pending key is in the JWKS");
  assert.ok((await f.identity.keys.publicKeyDer(next)).length > 200, "GetPublicKey serves the pending key");
  assert.equal((await f.identity.keys.active()).kid, old, "the pending key does not sign");

  // Pre-publication not over: nothing moves.
  const early = await f.identity.keys.advanceRotation(policy, { now: at(t0, 9 * H + 30 * 60_000) });
  assert.equal(early.activated, undefined);
  assert.ok(early.pendingSince);

  const sw = await f.identity.keys.advanceRotation(policy, { now: at(t0, 10 * H + 2000) });
  assert.deepEqual([sw.activated, sw.deactivated], [next, old]);
  assert.equal((await f.identity.keys.active()).kid, next, "the new key signs at once after the switch");
  assert.equal((await f.identity.jwt.verify(oldToken)).authKeyId, old, "a token of the old key still verifies");
  assert.equal((await f.identity.jwt.verify(await user.jwt())).authKeyId, next);
  assert.deepEqual(await publishedKids(), [next, old]);
  assert.ok(await f.identity.keys.publicKeyDer(old));

  const kept = await f.identity.keys.advanceRotation(policy, { now: at(t0, 11 * H + 2000) });
  assert.deepEqual(kept.retired, [], "retention is counted from when the key stopped signing");

  const gone = await f.identity.keys.advanceRotation(policy, { now: at(t0, 12 * H + 3000) });
  assert.deepEqual(gone.retired, [old]);
  assert.equal((await states())[old], "retired");
  assert.deepEqual(await publishedKids(), [next]);
  await assert.rejects(f.identity.jwt.verify(oldToken), (e: { reason?: string }) => e.reason === AuthReason.keyRetired);
  await assert.rejects(
    f.identity.keys.publicKeyDer(old),
    (e: { reason?: string; code?: string }) => e.reason === AuthReason.kidUnknown,
  );
  const audit = await f.identity.db
    .selectFrom("audit_events")
    .select("action")
    .where("action", "=", "signing_key.rotation_step")
    .execute();
  assert.equal(audit.length, 3);
});

test("replicas stepping at once take turns: one pending key, one switch, one active key", async () => {
  const replicas = [0, 1, 2].map(() => new SigningKeys(f.identity.db, f.kek, new AuthCaches({ enabled: false })));
  const now = new Date(Date.now() + 100 * H);
  const published = await Promise.all(replicas.map((r) => r.advanceRotation(policy, { now, force: true })));
  assert.equal(published.filter((s) => s.published).length, 1, JSON.stringify(published));
  const later = new Date(now.getTime() + H + 1000);
  const switched = await Promise.all(replicas.map((r) => r.advanceRotation(policy, { now: later })));
  assert.equal(switched.filter((s) => s.activated).length, 1, JSON.stringify(switched));
  const byState = Object.values(await states());
  assert.equal(byState.filter((s) => s === "active").length, 1);
  assert.equal(byState.filter((s) => s === "pending").length, 0);
  const kids = new Set(await Promise.all(replicas.map(async (r) => (await r.active()).kid)));
  assert.equal(kids.size, 1);
});

test("pre-publication counts from when the key was written, not from when its step began (a slow key generation)", async () => {
  // The step's clock reads half an hour before its row is written, as when generating the key took that long.
  const began = new Date(Date.now() - 30 * 60_000);
  const step = await f.identity.keys.advanceRotation(policy, { now: began, force: true });
  const next = step.published!;
  assert.ok(next);
  const early = await f.identity.keys.advanceRotation(policy, {
    now: new Date(Date.now() + policy.prePublishMs - 60_000),
  });
  assert.equal(early.activated, undefined, "not active before it has been published prePublishMs");
  assert.notEqual((await f.identity.keys.active()).kid, next, "the pending key does not sign yet");
  const due = await f.identity.keys.advanceRotation(policy, { now: new Date(Date.now() + policy.prePublishMs + 1000) });
  assert.equal(due.activated, next);
});
