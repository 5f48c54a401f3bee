// test-timeout: 600000
// `platform members` and `platform invitations` as a user runs them, against
// the real identity service: a second person joins through an invitation,
// acts, changes role, is removed and refused. (Each CLI start costs ~5 s on
// a loaded machine: the steps are few and each proves something.)
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { IDENTITY_OWNER, startIdentityOnly } from "../testing/identity-only.ts";

let id: Awaited<ReturnType<typeof startIdentityOnly>>;
// A cold identity (tsx, PGlite) and ~5-10 s per CLI start on a loaded 2-core machine: generous bounds.
before(
  async () => {
    id = await startIdentityOnly();
  },
  { timeout: 330_000 },
);
after(() => id?.stop(), { timeout: 30_000 });

test("invite, accept as the second person, act, change role, remove; refusals with their codes", {
  timeout: 400_000,
}, async () => {
  const { ok, run, json, errorOf } = id;
  await id.login("owner");
  const invited = await json("owner", ["members", "invite", "--email", "bob@example.com", "--role", "member"]);
  assert.match(invited.token, /^inv_/);
  assert.equal(invited.email, "bob@example.com");
  // Without --json the token is the first line.
  const human = await ok("owner", ["members", "invite", "--email", "carol@example.com"]);
  assert.match(human.stdout.split("\n")[0]!, /^token: inv_[0-9A-Za-z]+$/);

  // Bob signs in by accepting (the CLI stores his session).
  assert.deepEqual(
    await json("bob", ["invitations", "accept", invited.token, "--password", "bob-password-1", "--name", "Bob"]),
    {
      email: "bob@example.com",
      loggedIn: true,
    },
  );
  const used = await run("eve", ["invitations", "accept", invited.token, "--password", "eve-password-1", "--json"]);
  assert.equal(used.code, 1);
  assert.equal(errorOf(used).code, "invitation_used");

  const members = await json("owner", ["members", "list"]);
  assert.deepEqual(
    members.map((m: { email: string; role: string }) => [m.email, m.role]),
    [
      [IDENTITY_OWNER.email, "owner"],
      ["bob@example.com", "member"],
    ],
  );
  const refused = await run("bob", ["members", "list", "--json"]);
  assert.equal(refused.code, 1);
  assert.equal(errorOf(refused).code, "insufficient_role");

  assert.equal((await json("owner", ["members", "role", "bob@example.com", "--role", "owner"])).role, "owner");
  assert.match(
    (await ok("owner", ["members", "role", members[1].user_id, "--role", "member"])).stdout,
    /bob@example.com is now member/,
  );

  const last = await run("owner", ["members", "remove", IDENTITY_OWNER.email, "--json"]);
  assert.equal(last.code, 1);
  assert.equal(errorOf(last).code, "last_owner");

  assert.deepEqual(await json("owner", ["members", "remove", "bob@example.com"]), {
    removed: members[1].user_id,
    email: "bob@example.com",
  });
  // Bob's stored session (access and refresh token) stops at once.
  const gone = await run("bob", ["whoami", "--json"]);
  assert.equal(gone.code, 1);
  assert.equal(errorOf(gone).status, 401);
});
