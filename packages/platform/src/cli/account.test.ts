// test-timeout: 900000
// `platform users` (one's own account) and `platform api-keys --org` as a
// user runs them, against the real identity service: name, password (the
// other sessions stop, this one goes on), organization keys created, listed
// and revoked by an owner. (Each CLI start costs
// ~5 s, and up to 40 s on an overloaded machine: the steps are few and each
// proves something.)
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

async function restLogin(password: string) {
  const r = await fetch(`${id.url}/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: IDENTITY_OWNER.email, password }),
  });
  return { status: r.status, json: (await r.json()) as { access_token: string; refresh_token: string } };
}
const refresh = (token: string) =>
  fetch(`${id.url}/v1/auth/refresh`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ refresh_token: token }),
  }).then((r) => r.status);

test("users me, update --name, password (wrong current refused; other sessions signed out, this one goes on); api-keys --org", {
  timeout: 780_000,
}, async () => {
  const { ok, run, json, errorOf } = id;
  await id.login("owner");
  assert.equal((await json("owner", ["users", "update", "--name", "Olivia Owner"])).name, "Olivia Owner");
  const me = await ok("owner", ["users", "me"]);
  assert.match(me.stdout, /^owner@example\.com \(Olivia Owner\) [0-9a-f-]{36}$/m);

  const wrong = await run("owner", [
    "users",
    "password",
    "--current-password",
    "not-my-password",
    "--new-password",
    "next-password-22",
    "--json",
  ]);
  assert.equal(wrong.code, 1);
  assert.equal(errorOf(wrong).status, 401);

  // Another session of the same person (a second device), signed in before the change.
  const other = await restLogin(IDENTITY_OWNER.password);
  assert.equal(other.status, 200);
  // Both passwords from the environment (flags work as well: see the refusal above).
  assert.deepEqual(
    await json("owner", ["users", "password"], {
      PLATFORM_PASSWORD: IDENTITY_OWNER.password,
      PLATFORM_NEW_PASSWORD: "next-password-22",
    }),
    {
      changed: true,
      otherSessionsRevoked: true,
    },
  );
  assert.equal(await refresh(other.json.refresh_token), 401, "the other session's refresh token is revoked");
  assert.equal((await restLogin(IDENTITY_OWNER.password)).status, 401, "the old password no longer works");
  assert.equal((await restLogin("next-password-22")).status, 200);

  // Both from stdin, a line each (what a script piping secrets does): the current one first.
  const piped = await run("owner", ["users", "password", "--json"], {}, "next-password-22\nthird-password-33\n");
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(JSON.parse(piped.stdout).changed, true);
  assert.equal((await restLogin("next-password-22")).status, 401);
  assert.equal((await restLogin("third-password-33")).status, 200);

  // This CLI session goes on with the pair the change answered: an owner's organization key.
  const key = await json("owner", [
    "api-keys",
    "create",
    "--name",
    "ci",
    "--org",
    "--scope",
    "read",
    "--scope",
    "sessions:run",
  ]);
  assert.equal(key.org, true);
  assert.match(key.raw_key, /^sk_live_/);
  assert.deepEqual(key.scopes, ["read", "sessions:run"]);
  const orgKeys = await json("owner", ["api-keys", "list", "--org"]);
  assert.deepEqual(
    orgKeys.map((k: { id: string; org: boolean }) => [k.id, k.org]),
    [[key.id, true]],
  );

  // A member's refusal (403 insufficient_role) is identity's: api-keys/org-keys.db.test.ts.
  assert.deepEqual(await json("owner", ["api-keys", "revoke", key.id, "--org"]), { revoked: key.id });
});
