import { PGlite } from "@electric-sql/pglite";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { PGlitePool } from "./pglite-pool.ts";

// int8 and numeric as JS values: counters and byte sizes in this platform fit
// in 2^53, and callers should not have to parse strings.
pg.types.setTypeParser(20, (v) => Number(v));

export type DatabaseOptions = {
  /** postgres:// URL. Absent: an embedded PGlite database. */
  url?: string;
  /** PGlite data directory; absent: in memory. Ignored with `url`. */
  dataDir?: string;
  maxConnections?: number;
  minConnections?: number;
  /** Pool connection lifetime, milliseconds. */
  maxLifetimeMs?: number;
};

export type Database<DB> = {
  db: Kysely<DB>;
  kind: "postgres" | "pglite";
  /** Runs a raw multi-statement SQL script (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
};

export async function openDatabase<DB>(options: DatabaseOptions = {}): Promise<Database<DB>> {
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 20,
      min: options.minConnections ?? 2,
      maxLifetimeSeconds: options.maxLifetimeMs ? Math.ceil(options.maxLifetimeMs / 1000) : 1800,
    });
    // An idle client's socket error must not crash the process.
    pool.on("error", () => {});
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    return {
      db,
      kind: "postgres",
      exec: async (sql) => {
        await pool.query(sql);
      },
      close: () => db.destroy(),
    };
  }
  const pglite = await PGlite.create(options.dataDir ?? "memory://");
  const pool = new PGlitePool(pglite);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool as never }) });
  return {
    db,
    kind: "pglite",
    exec: async (sql) => {
      const client = await pool.connect();
      try {
        await pglite.exec(sql);
      } finally {
        client.release();
      }
    },
    close: () => db.destroy(),
  };
}
