import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql, type Transaction } from "kysely";
import { prepared, statementRunner } from "./prepared.ts";
import { createTestDatabase } from "./testing.ts";

let database: Awaited<ReturnType<typeof createTestDatabase<unknown>>>;

before(async () => {
  database = await createTestDatabase<unknown>();
});
after(() => database.close());

/** Names of the statements prepared on the transaction's connection. */
async function preparedOn(trx: Transaction<unknown>) {
  const { rows } = await sql<{ name: string }>`select name from pg_prepared_statements`.execute(trx);
  return rows.map((r) => r.name);
}

test("a prepared() statement runs under one name per text on PostgreSQL, the same answer on either backend", async () => {
  await database.db.transaction().execute(async (trx) => {
    const twice = (n: number) => prepared(sql<{ twice: number }>`select ${n}::int * 2 as twice`).execute(trx);
    assert.deepEqual((await twice(21)).rows, [{ twice: 42 }]);
    assert.deepEqual((await twice(5)).rows, [{ twice: 10 }], "the same name, other values");
    const other = await prepared(sql<{ sum: number }>`select ${1}::int + ${2}::int as sum`).execute(trx);
    assert.deepEqual(other.rows, [{ sum: 3 }]);
    await sql`select ${1}::int as plain`.execute(trx);
    const names = await preparedOn(trx);
    if (database.kind === "postgres") {
      assert.equal(names.length, 2, `one name per marked text, none for the plain one: ${names}`);
      assert.ok(names.every((n) => /^p_[0-9a-f]{24}$/.test(n)));
    } else assert.deepEqual(names, [], "PGlite runs the text as it is");
  });
});

test("a prepared() text without parameters keeps the simple protocol (several statements)", async () => {
  await prepared(sql`create temp table t_prep (a int); insert into t_prep values (7); drop table t_prep`).execute(
    database.db,
  );
});

test("run (PostgreSQL): a statement as preparedQuery() writes it, on a pooled connection under the name prepared() gives it, failures mapped", async () => {
  const { run } = database;
  if (database.kind !== "postgres") {
    assert.equal(run, undefined, "PGlite has no runner: its callers go through kysely");
    return;
  }
  assert.ok(run, "PostgreSQL has a runner");
  const text = "select $1::int * 2 as twice";
  assert.deepEqual(await run<{ twice: number }>(text, [21]), [{ twice: 42 }]);
  assert.deepEqual(await run<{ twice: number }>(text, [5]), [{ twice: 10 }], "the same name, other values");
  // On the one connection of a transaction-less pool turn: the name is the one prepared() gives the text.
  const named = await run<{ name: string; statement: string }>(
    "select name, statement from pg_prepared_statements where statement like $1",
    ["%select name, statement from pg_prepared_statements%"],
  );
  assert.equal(named.length, 1, "its own statement is prepared on the connection that ran it");
  assert.match(named[0]!.name, /^p_[0-9a-f]{24}$/);
  await assert.rejects(run("select $1::int from no_such_table", [1]), (err: unknown) => {
    assert.equal((err as { code?: string }).code, "42P01", "a statement's own failure passes as pg gave it");
    return true;
  });
  // The connection that failed a statement is still good for the next one.
  for (let i = 0; i < 3; i++) assert.deepEqual(await run<{ twice: number }>(text, [i]), [{ twice: 2 * i }]);
});

test("statementRunner: the database's runner where it has one (PostgreSQL), else kysely (PGlite), the same rows", async () => {
  const runner = statementRunner(database);
  if (database.run) assert.equal(runner, database.run, "PostgreSQL: its own runner, nothing around it");
  const text = "select $1::int * 2 as twice, $2::text as label";
  for (const n of [21, 4])
    assert.deepEqual(await runner<{ twice: number; label: string }>(text, [n, "x"]), [{ twice: 2 * n, label: "x" }]);
  await assert.rejects(runner("select $1::int from no_such_table", [1]), (err: unknown) => {
    assert.equal((err as { code?: string }).code, "42P01", "a statement's own failure, on either backend");
    return true;
  });
});
