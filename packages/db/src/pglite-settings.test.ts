import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { sql } from "kysely";
import { openDatabase, PGLITE_SETTINGS } from "./connect.ts";

const root = mkdtempSync(join(tmpdir(), "pglite-settings-"));
after(() => rmSync(root, { recursive: true, force: true }));

const setting = async (db: Awaited<ReturnType<typeof openDatabase>>, name: string) =>
  (await sql<{ v: string }>`select current_setting(${name}) as v`.execute(db.db)).rows[0]?.v;

test("a new data directory gets its cluster from the initdb process; PGlite runs with PGLITE_SETTINGS; data survives a reopen", async () => {
  const dir = join(root, "cluster");
  const first = await openDatabase({ dataDir: dir });
  try {
    assert.equal(first.kind, "pglite");
    for (const [name, value] of Object.entries(PGLITE_SETTINGS)) assert.equal(await setting(first, name), value, name);
    await first.exec("create table kept (id int primary key); insert into kept values (7);");
  } finally {
    await first.close();
  }
  const again = await openDatabase({ dataDir: dir });
  try {
    const rows = (await sql<{ id: number }>`select id from kept`.execute(again.db)).rows;
    assert.deepEqual(rows, [{ id: 7 }]);
    assert.equal(await setting(again, "shared_buffers"), PGLITE_SETTINGS.shared_buffers);
  } finally {
    await again.close();
  }
});

test("an initdb that fails says so, with the data directory", async () => {
  // A file where the data directory's parent should be: the initdb process cannot make it.
  const file = join(root, "not-a-directory");
  writeFileSync(file, "");
  await assert.rejects(openDatabase({ dataDir: join(file, "db") }), (err: Error) => {
    assert.match(err.message, /PGlite initdb of .*not-a-directory\/db failed/);
    return true;
  });
});

test("in memory (no data directory) PGlite runs with the same settings", async () => {
  const db = await openDatabase({});
  try {
    assert.equal(await setting(db, "shared_buffers"), PGLITE_SETTINGS.shared_buffers);
  } finally {
    await db.close();
  }
});
