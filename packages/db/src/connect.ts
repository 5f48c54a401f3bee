import { existsSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { initdbInChild } from "./pglite-clusters.ts";
import { PGlitePool } from "./pglite-pool.ts";
import { GuardedPool, POOL_BOUNDS_DEFAULTS, type PoolBounds } from "./pool-guard.ts";
import { PreparingPool, type RunPrepared } from "./prepared.ts";
import { installTimestamptzParser } from "./timestamptz.ts";

// int8 and numeric as JS values: counters and byte sizes in this platform fit
// in 2^53, and callers should not have to parse strings.
pg.types.setTypeParser(20, (v) => Number(v));
installTimestamptzParser();

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

/**
 * PGlite's server settings beside its own defaults. PGlite keeps shared
 * memory inside its WASM memory, which never shrinks, and zeroes it at start,
 * so every megabyte of shared_buffers is resident for the life of the
 * process: PostgreSQL's 128 MB default made half of each embedded service's
 * idle footprint. A page not in the buffers is read from the data directory
 * through the OS page cache. maintenance_work_mem bounds what a migration's
 * CREATE INDEX may grow the WASM memory to (64 MB by default).
 */
export const PGLITE_SETTINGS: Readonly<Record<string, string>> = {
  shared_buffers: "16MB",
  maintenance_work_mem: "16MB",
};

const pgliteStartParams = (): string[] => [
  ...PGlite.defaultStartParams,
  ...Object.entries(PGLITE_SETTINGS).flatMap(([name, value]) => ["-c", `${name}=${value}`]),
];

export type Database<DB> = {
  db: Kysely<DB>;
  kind: "postgres" | "pglite";
  /** Runs a raw multi-statement SQL script (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * On PostgreSQL: runs a statement as preparedQuery() would (its text with
   * `$n` parameters, a named prepared statement) on a pooled connection
   * without kysely around it (PreparingPool.run), for a statement run on
   * every streamed token. Absent on PGlite.
   */
  run?: RunPrepared;
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
    const guarded = new GuardedPool(new PreparingPool(pool as never), bounds);
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: guarded as never }) });
    return {
      db,
      kind: "postgres",
      exec: async (sql) => {
        await pool.query(sql);
      },
      run: (text, values) => guarded.run(text, values),
      close: () => db.destroy(),
    };
  }
  // A data directory without a cluster gets one from a short-lived process (pglite-initdb.mjs says why).
  if (options.dataDir && !options.loadDataDir && !options.dataDir.includes("://"))
    if (!existsSync(join(options.dataDir, "PG_VERSION"))) await initdbInChild(options.dataDir);
  const pglite = await PGlite.create(options.dataDir ?? "memory://", {
    startParams: pgliteStartParams(),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
  });
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
