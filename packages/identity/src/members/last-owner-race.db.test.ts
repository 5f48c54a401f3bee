// Two owners removing (or demoting) each other at the same moment: the org's
// membership rows are locked first, so one change wins and the other finds
// itself the last owner. Repeated, as a race is: without the lock some
// rounds end with no owner at all.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { AuthContext } from "../auth/auth-context.ts";
import { createFixture, type Fixture } from "../testing/fixture.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

const ctxOf = (userId: string, orgId: string): AuthContext => ({
  userId,
  orgId,
  mode: "jwt",
  role: "owner",
  env: "test",
  method: "jwt_session",
});

test("20 rounds of two owners removing or demoting each other at once: every org keeps exactly one owner", async () => {
  for (let round = 0; round < 20; round++) {
    const a = await f.seedUser({ role: "owner" });
    const b = await f.seedUser({ role: "owner", orgId: a.orgId });
    const org = a.orgId;
    const results = await Promise.allSettled(
      round % 2 === 0
        ? [
            f.identity.members.remove(ctxOf(a.user.id, org), {}, org, b.user.id),
            f.identity.members.remove(ctxOf(b.user.id, org), {}, org, a.user.id),
          ]
        : [
            f.identity.members.setRole(ctxOf(a.user.id, org), {}, org, b.user.id, "member"),
            f.identity.members.setRole(ctxOf(b.user.id, org), {}, org, a.user.id, "member"),
          ],
    );
    const owners = await f.identity.db
      .selectFrom("memberships")
      .select("user_id")
      .where("org_id", "=", org)
      .where("role", "=", "owner")
      .execute();
    assert.equal(owners.length, 1, `round ${round}: ${results.map((r) => r.status).join(", ")}`);
    const refused = results.filter((r) => r.status === "rejected");
    assert.equal(refused.length, 1);
    assert.equal((refused[0] as PromiseRejectedResult).reason.reason, "last_owner");
  }
});
