import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
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
  if (!server) {
    try {
      return await openDatabase<DB>({ loadDataDir: await freshPgliteCluster() });
    } catch {
      // A cached cluster PGlite cannot start from (a build it was not made by): made again next time.
      rmSync(pgliteClusterFile(), { force: true });
      return openDatabase<DB>();
    }
  }
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

/**
 * A new PGlite cluster as a tarball, made once per machine and PGlite build
 * and kept in the temp directory: starting from it took 1.9 s where PGlite's
 * own initdb took 8 s (quiet machine; 19 s against 58 s at a load of 20), in
 * each of the ~40 suite runs on PGlite. Written under another name and
 * renamed, so a suite never reads half a file; one PGlite cannot start
 * from is removed (createTestDatabase) and made again by the next suite.
 */
async function freshPgliteCluster(): Promise<Blob> {
  return new Blob([readFileSync(await pgliteClusterTarball())]);
}

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
 * Puts the cached new cluster into `dir` (made if missing) unless it holds
 * one already, for a test that starts a service on an embedded database: the
 * service then opens it as on a restart instead of running PGlite's initdb,
 * which took 3.5 s and 5 s of CPU per database on a quiet 2-core machine,
 * three times per platform started, in every test file that starts one.
 * The first start of an empty data directory stays tested where it is the
 * subject (quickstart.test runs `scripts/run.sh` on a new one).
 */
export async function seedPgliteDataDir(dir: string): Promise<void> {
  if (existsSync(join(dir, "PG_VERSION"))) return;
  const tarball = await pgliteClusterTarball();
  mkdirSync(dir, { recursive: true });
  // The dump names its members from the root ("/base/..."); tar makes them relative to -C.
  execFileSync("tar", ["-xf", tarball, "-C", dir], { stdio: ["ignore", "ignore", "pipe"] });
}

function pgliteClusterFile(): string {
  const build = createHash("sha256")
    .update(import.meta.resolve("@electric-sql/pglite"))
    .digest("hex")
    .slice(0, 16);
  return join(tmpdir(), `platform-test-pglite-${build}.tar`);
}
