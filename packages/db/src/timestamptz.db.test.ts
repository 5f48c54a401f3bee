// timestamptz values read back from the database in several session time
// zones are the same instants (on PostgreSQL through pg and our parser; on
// PGlite through its own).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { createTestDatabase } from "./testing.ts";

let database: Awaited<ReturnType<typeof createTestDatabase<Record<string, never>>>>;

before(async () => {
  database = await createTestDatabase();
});
after(() => database.close());

test("timestamptz reads back as the same instant whatever the session's time zone", async () => {
  const instants = ["2026-11-26T22:36:16.123Z", "1999-12-31T23:59:59.999Z", "2000-02-29T12:00:00.000Z"];
  // Local mean time offsets with seconds (St John's before 1935: -03:30:52); PGlite's own parser reads no
  // such offset, pg's (ours) does.
  if (database.kind === "postgres") instants.push("0150-07-04T01:02:03.004Z", "1900-01-01T00:00:00.000Z");
  for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati", "Europe/Amsterdam"]) {
    await database.db.transaction().execute(async (trx) => {
      await sql`select set_config('TimeZone', ${zone}, true)`.execute(trx);
      for (const iso of instants) {
        const { rows } = await sql<{
          t: Date;
          micro: Date;
        }>`select ${iso}::timestamptz as t, (${iso}::timestamptz + interval '456 microseconds') as micro`.execute(trx);
        const row = rows[0];
        assert.ok(row);
        assert.equal(row.t.toISOString(), iso, `${zone} ${iso}`);
        assert.equal(row.micro.toISOString(), iso, `${zone} ${iso} + 456 µs (truncated)`);
      }
    });
  }
});
