import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Fixture, createFixture } from "../testing/fixture.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

const input = { email: "Boot@Example.com", password: "bootstrap-pw-1", name: "Boot", orgName: "Boot Org" };

test("creates the owner and the org once; re-running changes nothing", async () => {
  const first = await f.identity.bootstrap(input);
  assert.equal(first.created, true);
  const pair = await f.identity.sessions.login({ email: "boot@example.com", password: input.password });
  const ctx = await f.identity.jwt.verify(pair.accessToken);
  assert.equal(ctx.role, "owner");
  assert.equal(ctx.orgId, first.orgId);
  const org = await f.identity.orgs.getForCaller(ctx, ctx.orgId);
  assert.deepEqual([org.name, org.slug], ["Boot Org", "boot-org"]);

  const snapshot = async () => ({
    users: await f.identity.db.selectFrom("users").selectAll().orderBy("id").execute(),
    orgs: await f.identity.db.selectFrom("orgs").selectAll().orderBy("id").execute(),
    memberships: await f.identity.db.selectFrom("memberships").selectAll().orderBy("user_id").execute(),
  });
  const before_ = await snapshot();
  const again = await f.identity.bootstrap({ ...input, email: "BOOT@example.com", password: "another-password", orgName: "Renamed" });
  assert.deepEqual(again, { created: false, userId: first.userId });
  assert.deepEqual(await snapshot(), before_);
  await f.identity.sessions.login({ email: "boot@example.com", password: input.password });
});

test("two concurrent bootstraps create one owner", async () => {
  const x = { ...input, email: "race@example.com", orgName: "Race Org" };
  const [a, b] = await Promise.all([f.identity.bootstrap(x), f.identity.bootstrap({ ...x })]);
  assert.equal([a, b].filter((r) => r.created).length, 1);
  assert.equal(a.userId, b.userId);
  assert.equal((await f.identity.db.selectFrom("orgs").select("id").where("name", "=", "Race Org").execute()).length, 1);
});
