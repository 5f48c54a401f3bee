import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A PostgreSQL server of a test's own: a fresh cluster (initdb) in a temporary
 * directory on a free loopback port, run as the postgres user. Fault tests stop
 * and start it at will; the shared server on 5432 is never touched.
 */
export type PrivateCluster = {
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust authentication). */
  url: string;
  port: number;
  dir: string;
  /** A database URL on this cluster (the database is created if it is missing). */
  database(name: string): Promise<string>;
  /** Stops the server; "immediate" is a crash (no checkpoint, clients cut off). */
  stop(mode?: "fast" | "immediate"): void;
  start(): void;
  /** Stops it (if running) and removes its directory. */
  destroy(): void;
};

/** The newest installed server's bin directory (/usr/lib/postgresql/<major>/bin). */
export function postgresBinDir(): string | undefined {
  const base = "/usr/lib/postgresql";
  let majors: string[];
  try {
    majors = readdirSync(base).filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  const newest = majors.sort((a, b) => Number(b) - Number(a))[0];
  return newest ? join(base, newest, "bin") : undefined;
}

function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  if (!line) throw new Error("no postgres user on this machine");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * initdb + pg_ctl start. Needs root (the server runs as postgres) or to be run
 * as postgres. fsync is off: the data is thrown away, and an "immediate" stop
 * still loses nothing committed (commits write the WAL synchronously; only the
 * flush to disk is skipped, and the machine does not crash).
 */
export async function startPrivateCluster(): Promise<PrivateCluster> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL server binaries not found under /usr/lib/postgresql");
  const owner = process.getuid?.() === 0 ? postgresUser() : undefined;
  const dir = mkdtempSync(join(tmpdir(), "pg-private-"));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, "data");
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const run = (tool: string, args: string[]) =>
    execFileSync(join(bin, tool), args, { ...as, cwd: dir, stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    "-c listen_addresses=127.0.0.1",
    "-c fsync=off",
    "-c full_page_writes=off",
    "-c max_connections=300",
    "-c shared_buffers=32MB",
  ].join(" ");
  let running = false;
  const start = () => {
    run("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "server.log"), "-w", "-t", "120", "start"]);
    running = true;
  };
  const stop = (mode: "fast" | "immediate" = "fast") => {
    if (!running) return;
    run("pg_ctl", ["-D", data, "-m", mode, "-w", "-t", "60", "stop"]);
    running = false;
  };
  // A runner that gives up on the file may skip `after`: the server must not outlive it.
  const reap = () => {
    if (running) spawnSync(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "stop"], { ...as, stdio: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", reap);
  start();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    dir,
    database: async (name) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
      const psql = spawnSync(
        join(bin, "psql"),
        [
          "-h",
          "127.0.0.1",
          "-p",
          String(port),
          "-U",
          "postgres",
          "-Atc",
          `select 1 from pg_database where datname = '${name}'`,
        ],
        {
          encoding: "utf8",
        },
      );
      if (psql.stdout.trim() !== "1") run("createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", name]);
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    stop,
    start,
    destroy: () => {
      process.off("exit", reap);
      reap();
    },
  };
}
