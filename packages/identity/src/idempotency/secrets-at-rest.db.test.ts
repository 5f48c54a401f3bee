// Issue 14 item 2: no raw API key or refresh token in a full dump of the
// identity database (pg_dump on PostgreSQL; every row of every table as text
// on PGlite), and a replay of CreateAPIKey still returns its key, to the
// same caller with the same Idempotency-Key only.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import { type TestServer, startTestServer } from "../testing/server.ts";
import { keyDigest } from "./sealed-response.ts";

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

/** Every form a secret could take in a dump: as text, and its UTF-8 bytes as hex (bytea) and base64. */
function forms(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  // The random part alone too, in case a prefix were stored apart from it.
  const body = secret.replace(/^(sk_(live|test)_|rt_)/, "");
  // A JWT's signature alone is as good as the token to anyone who can see the rest of it.
  const signature = secret.split(".").length === 3 ? [secret.split(".")[2]!] : [];
  return [secret, body, ...signature, bytes.toString("hex"), bytes.toString("base64"), bytes.toString("base64url")];
}

/** The whole database as text: pg_dump on PostgreSQL, every row of every table on PGlite. */
async function fullDump(): Promise<string> {
  const url = s.database.url;
  if (url)
    return execFileSync("pg_dump", ["--no-owner", "--data-only", "--inserts", url], {
      encoding: "utf8",
      maxBuffer: 64 << 20,
    });
  const tables = await sql<{ table_name: string }>`
    select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`.execute(
    s.identity.db,
  );
  assert.ok(tables.rows.length >= 8, "every identity table is dumped");
  const parts: string[] = [];
  for (const { table_name } of tables.rows) {
    const rows = await sql<Record<string, unknown>>`select * from ${sql.table(table_name)}`.execute(s.identity.db);
    parts.push(
      table_name,
      JSON.stringify(rows.rows, (_k, v) =>
        v instanceof Uint8Array ? `${Buffer.from(v).toString("hex")} ${Buffer.from(v).toString("latin1")}` : v,
      ),
    );
  }
  return parts.join("\n");
}

describe("secrets at rest", () => {
  const secrets: string[] = [];
  let replayKey = "";

  before(async () => {
    const first = await s.login();
    // The password and the access tokens are never stored either.
    secrets.push(first.refresh_token, first.access_token, "owner-password-1");
    const refreshed = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: first.refresh_token } });
    assert.equal(refreshed.status, 200);
    secrets.push(refreshed.json.refresh_token, refreshed.json.access_token);
    const token = refreshed.json.access_token as string;
    for (const [i, env] of ["live", "test", "live"].entries()) {
      const idem = `create-${i}-${Date.now()}`;
      const r = await s.call("POST", "/v1/users/me/api_keys", { token, idem, body: { name: `k${i}`, env } });
      assert.equal(r.status, 201, r.text);
      secrets.push(r.json.raw_key);
      if (i === 0) {
        replayKey = idem;
        // The replay reads the stored (sealed) response back.
        const again = await s.call("POST", "/v1/users/me/api_keys", { token, idem, body: { name: "k0", env } });
        assert.equal(again.headers.get("idempotent-replayed"), "true");
        assert.equal(again.json.raw_key, r.json.raw_key);
      }
    }
  });

  test("no raw API key or refresh token appears anywhere in a full dump of the database", async () => {
    const dump = await fullDump();
    assert.ok(dump.includes("idempotency_keys"), "the dump holds the idempotency records");
    assert.equal(secrets.length, 8);
    for (const secret of secrets) {
      for (const form of forms(secret))
        assert.ok(!dump.includes(form), `the dump holds a secret (${secret.slice(0, 8)}…) as ${form.slice(0, 12)}…`);
    }
  });

  test("the Idempotency-Key itself is stored only as its SHA-256", async () => {
    const dump = await fullDump();
    assert.ok(!dump.includes(replayKey), "the Idempotency-Key is stored in clear");
    assert.ok(dump.includes(keyDigest(replayKey)));
  });
});

describe("replay of CreateAPIKey", () => {
  test("the same caller with the same key and request gets the original raw_key; another caller gets its own key", async () => {
    const owner = await s.login();
    const idem = `replay-${Date.now()}`;
    const body = { name: "replayed", env: "test" };
    const created = await s.call("POST", "/v1/users/me/api_keys", { token: owner.access_token, idem, body });
    assert.equal(created.status, 201);
    const replay = await s.call("POST", "/v1/users/me/api_keys", { token: owner.access_token, idem, body });
    assert.equal(replay.status, 201);
    assert.equal(replay.headers.get("idempotent-replayed"), "true");
    assert.deepEqual(replay.json, created.json);
    // The replayed key works: it is the one the database holds the hash of.
    const me = await s.call("GET", "/v1/users/me", { token: replay.json.raw_key });
    assert.equal(me.status, 200);

    // Another member of the org with the same Idempotency-Key: a new key of its own, never the owner's.
    const email = `other-${Date.now()}@example.com`;
    const other = await s.identity.users.create({ email, name: "Other", password: "other-password" });
    const orgId = (await s.identity.db.selectFrom("memberships").select("org_id").limit(1).executeTakeFirstOrThrow())
      .org_id;
    await s.identity.db
      .insertInto("memberships")
      .values({ user_id: other.id, org_id: orgId, role: "member" })
      .execute();
    const otherPair = await s.login(email, "other-password");
    const theirs = await s.call("POST", "/v1/users/me/api_keys", { token: otherPair.access_token, idem, body });
    assert.equal(theirs.status, 201);
    assert.equal(theirs.headers.get("idempotent-replayed"), null);
    assert.notEqual(theirs.json.raw_key, created.json.raw_key);
  });

  test("a record whose sealed response was altered is refused, never replayed nor run again", async () => {
    const owner = await s.login();
    const idem = `tamper-${Date.now()}`;
    const body = { name: "tampered", env: "test" };
    const created = await s.call("POST", "/v1/users/me/api_keys", { token: owner.access_token, idem, body });
    assert.equal(created.status, 201);
    const row = await s.identity.db
      .selectFrom("idempotency_keys")
      .select(["scope", "response"])
      .where("key", "=", keyDigest(idem))
      .executeTakeFirstOrThrow();
    const altered = Buffer.from(row.response!);
    altered[altered.length - 1]! ^= 1;
    await s.identity.db
      .updateTable("idempotency_keys")
      .set({ response: altered })
      .where("key", "=", keyDigest(idem))
      .execute();
    const keysBefore = (await s.call("GET", "/v1/users/me/api_keys", { token: owner.access_token })).json.length;
    const r = await s.call("POST", "/v1/users/me/api_keys", { token: owner.access_token, idem, body });
    assert.equal(r.status, 500);
    assert.ok(!r.text.includes(created.json.raw_key));
    assert.equal((await s.call("GET", "/v1/users/me/api_keys", { token: owner.access_token })).json.length, keysBefore);
  });
});
