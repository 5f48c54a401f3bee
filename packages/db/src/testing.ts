import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { PGlite } from "@electric-sql/pglite";
import pg from "pg";
import { type Database, openDatabase } from "./connect.ts";
import { type Migration, migrate } from "./migrate.ts";
import type { PoolBounds } from "./pool-guard.ts";

/** The PostgreSQL server tests use, if any: TEST_DATABASE_URL, else DATABASE_URL. */
export function testServerUrl(): string | undefined {
  if (process.env.TEST_DB === "pglite") return undefined;
  return process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || undefined;
}

/** A service's migrations, as it applies them when it starts: `migrate(database, table, migrations)`. */
export type TestMigrations = { table: string; migrations: readonly Migration[] };

export type TestDatabaseOptions = {
  /**
   * The migrations the suite's service applies when it starts. On PGlite the
   * database then starts as a copy of a cluster they were applied to, made
   * once per machine (see migratedPgliteCluster), and the service's migrate()
   * finds nothing to do. They are still applied from an empty database on
   * PostgreSQL in every suite, and on PGlite in the suites that pass none
   * (the migration suites).
   */
  migrated?: TestMigrations;
  /** Bounds of the wait for a connection (openDatabase's poolBounds). */
  poolBounds?: Partial<PoolBounds>;
};

/**
 * A fresh database for one test suite: a new, empty database on the
 * PostgreSQL server when one is configured (dropped on close), else an
 * embedded PGlite one in a temporary data directory (removed on close). The
 * same suites run on both.
 */
export async function createTestDatabase<DB>(
  options: TestDatabaseOptions = {},
): Promise<Database<DB> & { url?: string }> {
  const server = testServerUrl();
  if (!server) return pgliteTestDatabase<DB>(options);
  const name = `t_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(server);
  url.pathname = `/${name}`;
  // The services' own pool size: a larger one lets one suite's flood take every
  // connection the server has (100 by default) and fail the suites beside it.
  const database = await openDatabase<DB>({
    url: url.toString(),
    maxConnections: 20,
    minConnections: 0,
    poolBounds: options.poolBounds,
  });
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

/**
 * PGlite on a copy of a cached cluster in a data directory of its own,
 * not in memory from the tarball: PGlite's loadDataDir unpacks all ~1,000
 * files of the 40 MB cluster into its in-memory file system in JavaScript
 * (0.8-1.0 s of CPU per database in a probe at a load of 10, against
 * 0.4-0.5 s for tar and opening the directory, where PGlite reads only the
 * pages it needs). With the migrated clusters, the PGlite runs of the agents
 * and compute suites took 221 s of CPU against 248 s (33 suites, A/B
 * alternated, load 2-15). Kept in /dev/shm where there is one, so what the
 * suite writes never goes to a disk.
 */
async function pgliteTestDatabase<DB>({ migrated, poolBounds }: TestDatabaseOptions): Promise<Database<DB>> {
  const dir = mkdtempSync(join(testDataDirParent(), `${TEST_DIR_PREFIX}${process.pid}-`));
  const remove = () => {
    rmSync(dir, { recursive: true, force: true });
    openDataDirs.delete(dir);
  };
  openDataDirs.add(dir);
  const tarball = migrated ? await migratedPgliteCluster(migrated) : await pgliteClusterTarball();
  try {
    extract(tarball, dir);
    const database = await openDatabase<DB>({ dataDir: dir, poolBounds });
    return {
      ...database,
      close: async () => {
        try {
          await database.close();
        } finally {
          remove();
        }
      },
    };
  } catch {
    // A cached cluster PGlite cannot start from (a build it was not made by): made again next time.
    remove();
    rmSync(tarball, { force: true });
    rmSync(pgliteClusterFile(), { force: true });
    return openDatabase<DB>({ poolBounds });
  }
}

const TEST_DIR_PREFIX = "platform-test-db-";

/** The data directories of this process's PGlite test databases not closed yet: removed when it exits (a suite that failed). */
const openDataDirs = new Set<string>();
process.on("exit", () => {
  for (const dir of openDataDirs) rmSync(dir, { recursive: true, force: true });
});

/** /dev/shm when there is one, else the temp directory; data directories of suites whose process is gone are removed from it. */
function testDataDirParent(): string {
  const parent = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  for (const name of readdirSync(parent)) {
    const pid = Number(name.startsWith(TEST_DIR_PREFIX) ? name.slice(TEST_DIR_PREFIX.length).split("-")[0] : NaN);
    if (Number.isInteger(pid) && pid > 0 && !alive(pid)) rmSync(join(parent, name), { recursive: true, force: true });
  }
  return parent;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A tarball of a PGlite cluster with `migrated` applied, made once per
 * machine, PGlite build and set of migrations (the file's name has a hash of
 * their names and SQL: a changed or added migration makes a new one) from the
 * new cluster below: applying a service's migrations took 0.2-0.7 s of CPU in
 * each suite. Shut down cleanly after a checkpoint, so a suite's PGlite
 * starts without replaying them. Written under another name and renamed;
 * others of the same service older than a day are removed (each is 40 MB).
 */
async function migratedPgliteCluster(migrated: TestMigrations): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(migrated.table)) throw new Error(`bad migration table name ${migrated.table}`);
  const hash = createHash("sha256");
  for (const m of [...migrated.migrations].sort((a, b) => a.name.localeCompare(b.name)))
    hash.update(`${m.name}\0${m.sql}\0`);
  const prefix = `${pgliteClusterFile().replace(/\.tar$/, "")}-${migrated.table}-`;
  const path = `${prefix}${hash.digest("hex").slice(0, 16)}.tar`;
  if (existsSync(path)) {
    const now = new Date();
    utimesSync(path, now, now);
    return path;
  }
  const dir = mkdtempSync(join(testDataDirParent(), `${TEST_DIR_PREFIX}${process.pid}-`));
  try {
    extract(await pgliteClusterTarball(), dir);
    const database = await openDatabase<unknown>({ dataDir: dir });
    try {
      await migrate(database, migrated.table, migrated.migrations);
      await sql`checkpoint`.execute(database.db);
    } finally {
      await database.close();
    }
    const part = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
    execFileSync("tar", ["-cf", part, "-C", dir, ...readdirSync(dir)], { stdio: ["ignore", "ignore", "pipe"] });
    renameSync(part, path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const dayAgo = Date.now() - 24 * 3600_000;
  for (const name of readdirSync(tmpdir())) {
    const other = join(tmpdir(), name);
    if (!other.startsWith(prefix) || other === path) continue;
    const modified = statSync(other, { throwIfNoEntry: false })?.mtimeMs;
    if (modified !== undefined && modified < dayAgo) rmSync(other, { force: true });
  }
  return path;
}

/** Unpacks a cluster tarball into `dir`. The dump names its members from the root ("/base/..."); tar makes them relative to -C. */
function extract(tarball: string, dir: string): void {
  execFileSync("tar", ["-xf", tarball, "-C", dir], { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * A new PGlite cluster as a tarball, made once per machine and PGlite build
 * and kept in the temp directory: starting from it took 1.9 s where PGlite's
 * own initdb took 8 s (quiet machine; 19 s against 58 s at a load of 20), in
 * each of the ~40 suite runs on PGlite. Written under another name and
 * renamed, so a suite never reads half a file; one PGlite cannot start
 * from is removed (createTestDatabase) and made again by the next suite.
 */
async function pgliteClusterTarball(): Promise<string> {
  const path = pgliteClusterFile();
  if (existsSync(path)) return path;
  const fresh = await PGlite.create("memory://");
  const dump = await fresh.dumpDataDir("none");
  await fresh.close();
  const part = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(part, Buffer.from(await dump.arrayBuffer()));
  renameSync(part, path);
  return path;
}

/**
 * Puts the cached new cluster (with `migrated` applied, when given) into
 * `dir` (made if missing) unless it holds one already, for a test that starts
 * a service on an embedded database: the service then opens it as on a
 * restart instead of running PGlite's initdb, which took 3.5 s and 5 s of CPU
 * per database on a quiet 2-core machine, three times per platform started,
 * in every test file that starts one. The first start of an empty data
 * directory stays tested where it is the subject (quickstart.test runs
 * `scripts/run.sh` on a new one).
 */
export async function seedPgliteDataDir(dir: string, migrated?: TestMigrations): Promise<void> {
  if (existsSync(join(dir, "PG_VERSION"))) return;
  const tarball = migrated ? await migratedPgliteCluster(migrated) : await pgliteClusterTarball();
  mkdirSync(dir, { recursive: true });
  extract(tarball, dir);
}

function pgliteClusterFile(): string {
  const build = createHash("sha256")
    .update(import.meta.resolve("@electric-sql/pglite"))
    .digest("hex")
    .slice(0, 16);
  return join(tmpdir(), `platform-test-pglite-${build}.tar`);
}
