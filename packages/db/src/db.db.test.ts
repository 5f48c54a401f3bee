import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { isUniqueViolation } from "./errors.ts";
import { migrate } from "./migrate.ts";
import { createTestDatabase } from "./testing.ts";

type DB = { item: { id: number; name: string } };
let database: Awaited<ReturnType<typeof createTestDatabase<DB>>>;

before(async () => {
  database = await createTestDatabase<DB>();
});
after(() => database.close());

const migrations = [
  { name: "0001_item", sql: "create table item (id int primary key, name text not null unique);" },
  { name: "0002_seed", sql: "insert into item values (1, 'one'); insert into item values (2, 'two');" },
];

test("migrations apply once, in order, even when two migrators race", async () => {
  const [a, b] = await Promise.all([
    migrate(database as never, "test_migrations", migrations),
    migrate(database as never, "test_migrations", migrations),
  ]);
  assert.deepEqual([...a, ...b].sort(), ["0001_item", "0002_seed"]);
  const rows = await database.db.selectFrom("item").selectAll().orderBy("id").execute();
  assert.deepEqual(rows, [
    { id: 1, name: "one" },
    { id: 2, name: "two" },
  ]);
  assert.deepEqual(await migrate(database as never, "test_migrations", migrations), []);
});

test("a unique violation is recognised on either backend", async () => {
  const err = await database.db
    .insertInto("item")
    .values({ id: 3, name: "one" })
    .execute()
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(isUniqueViolation(err), `expected 23505, got ${String(err)}`);
});

test("transactions are isolated from concurrent statements", async () => {
  await Promise.all([
    database.db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto("item").values({ id: 10, name: "ten" }).execute();
        await sql`select pg_sleep(0.05)`.execute(trx);
        throw new Error("rollback");
      })
      .catch(() => {}),
    database.db.insertInto("item").values({ id: 11, name: "eleven" }).execute(),
  ]);
  const ids = (await database.db.selectFrom("item").select("id").execute()).map((r) => r.id).sort((a, b) => a - b);
  assert.deepEqual(ids, [1, 2, 11]);
});

test("updates report affected rows", async () => {
  const res = await database.db.updateTable("item").set({ name: "uno" }).where("id", "=", 1).executeTakeFirst();
  assert.equal(Number(res.numUpdatedRows), 1);
});
