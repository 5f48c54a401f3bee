import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import { isUniqueViolation } from "@platform/db";
import { AuthCaches } from "../cache/auth-caches.ts";
import { open } from "@platform/credentials";
import { createFixture, type Fixture } from "../testing/fixture.ts";
import { SigningKeys } from "./signing-keys.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

test("two replicas calling ensureActiveKey at once on an empty table end with one active key", async () => {
  await f.identity.db.deleteFrom("signing_keys").execute();
  const a = new SigningKeys(f.identity.db, f.kek, new AuthCaches({ enabled: false }));
  const b = new SigningKeys(f.identity.db, f.kek, new AuthCaches({ enabled: false }));
  const [ka, kb] = await Promise.all([a.ensureActiveKey(), b.ensureActiveKey()]);
  assert.equal(ka, kb);
  const active = await f.identity.db.selectFrom("signing_keys").select("kid").where("state", "=", "active").execute();
  assert.deepEqual(
    active.map((r) => r.kid),
    [ka],
  );
  // A second start finds it and generates nothing.
  assert.equal(await new SigningKeys(f.identity.db, f.kek, new AuthCaches({ enabled: false })).ensureActiveKey(), ka);
  assert.equal((await f.identity.db.selectFrom("signing_keys").select("kid").execute()).length, 1);
});

test("the database refuses a second active key", async () => {
  const kid = await f.identity.keys.ensureActiveKey();
  const row = await f.identity.db
    .selectFrom("signing_keys")
    .selectAll()
    .where("kid", "=", kid)
    .executeTakeFirstOrThrow();
  const err = await f.identity.db
    .insertInto("signing_keys")
    .values({ kid: "other", state: "active", public_der: row.public_der, private_enc: row.private_enc })
    .execute()
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(isUniqueViolation(err), String(err));
});

test("the private key is stored AES-256-GCM sealed under the KEK, bound to its kid", async () => {
  const kid = await f.identity.keys.ensureActiveKey();
  const row = await f.identity.db
    .selectFrom("signing_keys")
    .selectAll()
    .where("kid", "=", kid)
    .executeTakeFirstOrThrow();
  const { privateKey } = await f.identity.keys.active();
  const pkcs8 = privateKey.export({ type: "pkcs8", format: "der" });
  const sealed = Buffer.from(row.private_enc);
  assert.equal(sealed.indexOf(pkcs8.subarray(30, 62)), -1, "plaintext key material at rest");
  assert.ok(open(f.kek, sealed, kid).equals(pkcs8));
  assert.throws(() => open(randomBytes(32), sealed, kid));
  assert.throws(() => open(f.kek, sealed, "another-kid"));
});

test("rotate retires the active key and activates a new one; signing follows at once", async () => {
  const before_ = await f.identity.keys.ensureActiveKey();
  const other = new SigningKeys(f.identity.db, f.kek, new AuthCaches({ enabled: false }));
  assert.equal((await other.active()).kid, before_);
  const after_ = await f.identity.keys.rotate();
  const states = await f.identity.db
    .selectFrom("signing_keys")
    .select(["kid", "state"])
    .where("kid", "in", [before_, after_])
    .execute();
  assert.deepEqual(Object.fromEntries(states.map((s) => [s.kid, s.state])), {
    [before_]: "retired",
    [after_]: "active",
  });
  // Another replica's cached key is noticed as retired on its next use.
  assert.equal((await other.active()).kid, after_);
});
