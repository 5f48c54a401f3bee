// test-timeout: 600000
// `platform orgs` as a user runs it, against the real identity service:
// create, list, switch without a password; a usage error.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { startIdentityOnly } from "../testing/identity-only.ts";

let id: Awaited<ReturnType<typeof startIdentityOnly>>;
// A cold identity (tsx, PGlite) and ~5-10 s per CLI start on a loaded 2-core machine: generous bounds.
before(
  async () => {
    id = await startIdentityOnly();
  },
  { timeout: 330_000 },
);
after(() => id?.stop(), { timeout: 30_000 });

test("orgs create, list, switch (no password); members of the new org; unknown org and missing flag are usage errors", {
  timeout: 400_000,
}, async () => {
  const { ok, run, json } = id;
  await id.login("olga");
  const created = await json("olga", ["orgs", "create", "--name", "Second Org", "--slug", "second-org"]);
  assert.equal(created.slug, "second-org");
  const listed = await json("olga", ["orgs", "list"]);
  assert.deepEqual(
    listed.map((o: { org: { slug: string }; current: boolean; role: string }) => [o.org.slug, o.role, o.current]),
    [
      ["first-org", "owner", true],
      ["second-org", "owner", false],
    ],
  );
  assert.match(
    (await ok("olga", ["orgs", "switch", "second-org"])).stdout,
    /now in Second Org \(second-org\) as owner/,
  );
  assert.match((await ok("olga", ["orgs", "list"])).stdout, /^\* \S+ {2}second-org/m);
  const unknown = await run("olga", ["orgs", "switch", "nope"]);
  assert.equal(unknown.code, 2);
  const missing = await run("olga", ["members", "invite"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--email is required/);
  assert.match(missing.stderr, /usage: platform members invite --email <email>/);
});
