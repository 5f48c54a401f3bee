import { spawn } from "node:child_process";
import { cpSync, existsSync, readdirSync, renameSync, rmdirSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Apart from connect.ts, which loads PGlite: the launcher imports this module
// for newPgliteClusters and must not hold PGlite's code for its whole life.

/** Runs pglite-initdb.mjs for `dataDir` and waits for it; its stderr in the error when it fails. */
export function initdbInChild(dataDir: string): Promise<void> {
  const script = fileURLToPath(new URL("./pglite-initdb.mjs", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--liftoff-only", script, dataDir], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 8192) stderr += chunk.toString();
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`PGlite initdb of ${dataDir} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`)),
    );
  });
}

/**
 * New PGlite clusters for those of `dataDirs` that are absent or empty (each
 * one's parent must exist), made by one initdb and copied to the rest: the
 * launcher's first start, whose services would otherwise each run their own
 * (about 5 s of CPU apiece, one after the other). A new cluster holds nothing
 * of the service that opens it, so each copy is what initdb would have made
 * there (only PostgreSQL's system identifier, which nothing here reads, is the
 * same in all). With fewer than two to make, nothing is done: openDatabase
 * makes a service's own when it opens a directory without one.
 */
export async function newPgliteClusters(dataDirs: string[]): Promise<void> {
  // A directory with anything in it is left to the service that opens it.
  const missing = dataDirs.filter((dir) => !existsSync(dir) || readdirSync(dir).length === 0);
  if (missing.length < 2) return;
  const [first, ...rest] = missing as [string, ...string[]];
  // PGlite makes the directory itself when it is absent, as in a service's own first start.
  await initdbInChild(first);
  for (const dir of rest) {
    // Copied beside its place and renamed in: an interrupted copy is never taken for a cluster.
    const tmp = `${dir}.new-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    try {
      cpSync(first, tmp, { recursive: true });
      if (existsSync(dir)) rmdirSync(dir);
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
  }
}
