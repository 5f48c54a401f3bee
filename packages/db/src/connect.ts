import { PGlite } from "@electric-sql/pglite";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { PGlitePool } from "./pglite-pool.ts";
import { GuardedPool, POOL_BOUNDS_DEFAULTS, type PoolBounds } from "./pool-guard.ts";

// int8 and numeric as JS values: counters and byte sizes in this platform fit
// in 2^53, and callers should not have to parse strings.
pg.types.setTypeParser(20, (v) => Number(v));

export type DatabaseOptions = {
  /** postgres:// URL. Absent: an embedded PGlite database. */
  url?: string;
  /** PGlite data directory; absent: in memory. Ignored with `url`. */
  dataDir?: string;
  /** A PGlite cluster to start from (a `dumpDataDir()` tarball) instead of a new one. Ignored with `url`. */
  loadDataDir?: Blob;
  maxConnections?: number;
  minConnections?: number;
  /** Pool connection lifetime, milliseconds. */
  maxLifetimeMs?: number;
  /** Bounds of the wait for a connection (pool-guard.ts); default POOL_BOUNDS_DEFAULTS. */
  poolBounds?: Partial<PoolBounds>;
};

export type Database<DB> = {
  db: Kysely<DB>;
  kind: "postgres" | "pglite";
  /** Runs a raw multi-statement SQL script (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
};

/** Opens PostgreSQL (`url`) or embedded PGlite (`dataDir`, or in memory) behind one Kysely interface, with bounded pool waits. */
export async function openDatabase<DB>(options: DatabaseOptions = {}): Promise<Database<DB>> {
  const bounds = { ...POOL_BOUNDS_DEFAULTS, ...options.poolBounds };
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 20,
      min: options.minConnections ?? 2,
      maxLifetimeSeconds: options.maxLifetimeMs ? Math.ceil(options.maxLifetimeMs / 1000) : 1800,
      // A server that does not answer a connection attempt (a dropped route)
      // fails it instead of hanging it; the guard's own timeout comes first.
      connectionTimeoutMillis: bounds.acquireTimeoutMs + 1000,
    });
    // An idle client's socket error must not crash the process.
    pool.on("error", () => {});
    const db = new Kysely<DB>({
      dialect: new PostgresDialect({ pool: new GuardedPool(pool as never, bounds) as never }),
    });
    return {
      db,
      kind: "postgres",
      exec: async (sql) => {
        await pool.query(sql);
      },
      close: () => db.destroy(),
    };
  }
  const pglite = await PGlite.create(
    options.dataDir ?? "memory://",
    options.loadDataDir ? { loadDataDir: options.loadDataDir } : {},
  );
  const pool = new PGlitePool(pglite);
  // One connection in this process, which cannot be down: a long wait is only
  // load (every statement of the service in one queue), so it is allowed
  // nearly the whole request deadline before a 503.
  const pgliteBounds = { ...POOL_BOUNDS_DEFAULTS, acquireTimeoutMs: 25_000, ...options.poolBounds };
  const db = new Kysely<DB>({
    dialect: new PostgresDialect({ pool: new GuardedPool(pool as never, pgliteBounds) as never }),
  });
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
