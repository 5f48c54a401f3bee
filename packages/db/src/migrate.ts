import { sql } from "kysely";
import type { Database } from "./connect.ts";

/** One forward-only migration: a name that sorts in order, and its SQL. */
export type Migration = { name: string; sql: string };

/**
 * Applies the migrations not yet recorded in `<table>`, in name order, each in
 * its own transaction. A PostgreSQL advisory lock makes concurrent migrators
 * (two replicas starting at once) apply each migration exactly once.
 */
export async function migrate(
  database: Database<unknown>,
  table: string,
  migrations: readonly Migration[],
): Promise<string[]> {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`bad migration table name ${table}`);
  const db = database.db;
  const applied: string[] = [];
  await db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(hashtext(${table}))`.execute(conn);
    try {
      await sql
        .raw(
          `create table if not exists ${table} (name text primary key, applied_at timestamptz not null default now())`,
        )
        .execute(conn);
      const done = await sql<{ name: string }>`select name from ${sql.table(table)}`.execute(conn);
      const have = new Set(done.rows.map((r) => r.name));
      for (const m of [...migrations].sort((a, b) => a.name.localeCompare(b.name))) {
        if (have.has(m.name)) continue;
        await sql.raw("begin").execute(conn);
        try {
          await sql.raw(m.sql).execute(conn);
          await sql`insert into ${sql.table(table)} (name) values (${m.name})`.execute(conn);
          await sql.raw("commit").execute(conn);
        } catch (err) {
          await sql.raw("rollback").execute(conn);
          throw err;
        }
        applied.push(m.name);
      }
    } finally {
      await sql`select pg_advisory_unlock(hashtext(${table}))`.execute(conn);
    }
  });
  return applied;
}
