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
  const again = await f.identity.bootstrap({
    ...input,
    email: "BOOT@example.com",
    password: "another-password",
    orgName: "Renamed",
  });
  assert.deepEqual(again, { created: false, userId: first.userId });
  assert.deepEqual(await snapshot(), before_);
  await f.identity.sessions.login({ email: "boot@example.com", password: input.password });
});

test("once an owner exists, a bootstrap with another email changes nothing (issue 19 item 7)", async () => {
  const owners = await f.identity.db.selectFrom("memberships").select("user_id").where("role", "=", "owner").execute();
  assert.ok(owners.length > 0);
  const again = await f.identity.bootstrap({ ...input, email: "someone-else@example.com", orgName: "Second Boot" });
  assert.equal(again.created, false);
  assert.ok(
    owners.some((o) => o.user_id === again.userId),
    "the existing owner is named",
  );
  assert.equal(await f.identity.users.findByEmail("someone-else@example.com"), undefined);
  assert.equal(
    (await f.identity.db.selectFrom("orgs").select("id").where("name", "=", "Second Boot").execute()).length,
    0,
  );
});

test("concurrent bootstraps with different emails, no owner yet, create one owner", async () => {
  // No owner left (one PGlite per file: a second database costs minutes on a loaded machine).
  await f.identity.db.deleteFrom("memberships").where("role", "=", "owner").execute();
  const results = await Promise.all(
    ["a", "b", "c"].map((x) =>
      f.identity.bootstrap({ ...input, email: `race-${x}@example.com`, orgName: `Race ${x}` }),
    ),
  );
  assert.equal(results.filter((r) => r.created).length, 1);
  assert.equal(new Set(results.map((r) => r.userId)).size, 1);
  const raced = await f.identity.db.selectFrom("users").select("id").where("email", "like", "race-%").execute();
  assert.equal(raced.length, 1);
  assert.equal(
    (await f.identity.db.selectFrom("orgs").select("id").where("name", "like", "Race %").execute()).length,
    1,
  );
});
