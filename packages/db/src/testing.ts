import { randomBytes } from "node:crypto";
import pg from "pg";
import { type Database, openDatabase } from "./connect.ts";

/** The PostgreSQL server tests use, if any: TEST_DATABASE_URL, else DATABASE_URL. */
export function testServerUrl(): string | undefined {
  if (process.env.TEST_DB === "pglite") return undefined;
  return process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || undefined;
}

/**
 * A fresh, empty database for one test suite: a new database on the
 * PostgreSQL server when one is configured (dropped on close), else an
 * in-memory PGlite instance. The same suites run on both.
 */
export async function createTestDatabase<DB>(): Promise<Database<DB> & { url?: string }> {
  const server = testServerUrl();
  if (!server) return openDatabase<DB>();
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(server);
  url.pathname = `/${name}`;
  // The services' own pool size: a larger one lets one suite's flood take every
  // connection the server has (100 by default) and fail the suites beside it.
  const database = await openDatabase<DB>({ url: url.toString(), maxConnections: 20, minConnections: 0 });
  return {
    ...database,
    url: url.toString(),
    close: async () => {
      await database.close();
      const drop = new pg.Client({ connectionString: server });
      await drop.connect();
      await drop.query(`drop database if exists ${name} with (force)`);
      await drop.end();
    },
  };
}
