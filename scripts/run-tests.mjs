#!/usr/bin/env node
// Runs every *.test.ts under packages/ with node's test runner (through tsx)
// against the PostgreSQL server (TEST_DATABASE_URL, default the local one),
// and the *.db.test.ts suites again on embedded PGlite, so each database
// suite passes on both backends. Prints the slowest files, the files with
// failures and one closing line. A file that fails is run once more alone
// (TEST_RETRIES, 1): passing then, it is listed as flaky and the run passes.
//   node scripts/run-tests.mjs [filter...]   only files whose path contains a filter
//   node scripts/run-tests.mjs --watch [filter...]   (pnpm test:watch) the matching files on
//     PostgreSQL, again whenever a file they import changes (node --test --watch); Ctrl-C ends it
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const watch = process.argv[2] === "--watch";
const filters = process.argv.slice(watch ? 3 : 2);

function find(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) find(path, out);
    else if (name.endsWith(".test.ts")) out.push(relative(root, path));
  }
  return out;
}

const all = find(join(root, "packages"))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
const dbSuites = all.filter((f) => f.endsWith(".db.test.ts"));

/**
 * Each file is bounded as a whole, hooks included (scripts/test-file-guard.mjs; 300 s here: an
 * identity suite on PGlite took 182 s in a CI run at a load average of 20). A
 * file that starts the whole platform may need longer on a loaded machine and
 * says so in its first lines: `// test-timeout: <ms>`.
 */
const DEFAULT_TIMEOUT_MS = 300_000;

function fileTimeout(file) {
  const m = /^\/\/ test-timeout: (\d+)$/m.exec(readFileSync(join(root, file), "utf8").slice(0, 4000));
  return m ? Number(m[1]) : DEFAULT_TIMEOUT_MS;
}

const isLong = (f) => fileTimeout(f) > DEFAULT_TIMEOUT_MS;

/**
 * Every file runs in a `node --test` of its own, bounded by its own timeout,
 * from one pool of TEST_CONCURRENCY slots (3): the files that start the whole
 * platform first (longest bound first, at most TEST_LONG_CONCURRENCY of them
 * at once, 2), the others filling the free slots. They wait on processes more
 * than they compute; run as groups one after the other the run was minutes
 * longer. Each file's output is printed in one block when it ends.
 */
async function runPool(jobs) {
  const slots = Number(process.env.TEST_CONCURRENCY ?? 3);
  const longSlots = Number(process.env.TEST_LONG_CONCURRENCY ?? 2);
  const queue = [...jobs].sort(
    (a, b) => Number(isLong(b.file)) - Number(isLong(a.file)) || fileTimeout(b.file) - fileTimeout(a.file),
  );
  const results = [];
  let running = 0;
  let longRunning = 0;
  return new Promise((resolve) => {
    const next = () => {
      while (running < slots) {
        const i = queue.findIndex((j) => !isLong(j.file) || longRunning < longSlots);
        if (i < 0) break;
        const [job] = queue.splice(i, 1);
        const long = isLong(job.file);
        running++;
        if (long) longRunning++;
        void runFile(job).then((r) => {
          results.push(r);
          running--;
          if (long) longRunning--;
          if (queue.length === 0 && running === 0) resolve(results);
          else next();
        });
      }
    };
    if (queue.length === 0) resolve(results);
    else next();
  });
}

const children = new Set();
/** When the run began: each file's line says when it started, so a run's tail (one slow file alone at the end) shows. */
const runStarted = Date.now();

/** Signals a running file's process group (only while its leader runs: a group id is handed out again once it is gone). */
function endGroup(child, signal) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {}
}

// Files run in groups of their own, out of the terminal's reach: Ctrl-C ends them here.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    for (const child of children) endGroup(child, "SIGINT");
    setTimeout(() => {
      for (const child of children) endGroup(child, "SIGKILL");
      process.exit(130);
    }, 5000).unref();
  });
}

/**
 * CI on 2 cores is bound by CPU, not by waiting (3 files at once kept the load
 * average at 7-9), so each file's CPU time is what tells where a run's time
 * goes: GNU time reports the user and system seconds of the file's process
 * and of every process it waited for (the services a test starts included).
 */
const TIME = "/usr/bin/time";

/**
 * V8 flags of every test process (node --test passes them on to the file's
 * own process). --liftoff-only, as the launcher runs the PGlite services:
 * without it V8 also compiles PGlite's hot WebAssembly with TurboFan in every
 * process that opens a database, which a test never runs long enough to earn
 * back (a PGlite suite, sessions.db.test: 9.1-9.5 s of CPU without, 6.8-6.9 s with).
 */
const NODE_FLAGS = ["--liftoff-only", "--import", "tsx"];
const REPORTERS = [
  "--test-reporter=spec",
  "--test-reporter-destination=stdout",
  `--test-reporter=${join(root, "scripts/test-file-guard.mjs")}`,
  "--test-reporter-destination=stderr",
];
const cpuDir = existsSync(TIME) ? mkdtempSync(join(tmpdir(), "test-cpu-")) : undefined;
process.on("exit", () => cpuDir && rmSync(cpuDir, { recursive: true, force: true }));
let cpuFiles = 0;

function readCpu(path) {
  try {
    const [user, sys] = readFileSync(path, "utf8").trim().split("\n").at(-1).split(" ").map(Number);
    return user + sys;
  } catch {
    return undefined;
  }
}

/** One file in a `node --test` of its own; its output held and printed when it ends. */
function runFile(job) {
  const { file, backend, env, attempt = 1 } = job;
  return new Promise((resolve) => {
    const timeout = fileTimeout(file);
    const started = Date.now();
    // The file runs directly, not under `node --test`: that parent process only
    // relayed the file's own process, at ~0.2 s of CPU per file (its own node and
    // tsx start), ~65 s per CI run. The guard reporter bounds the file instead.
    const args = [...NODE_FLAGS, ...REPORTERS, file];
    const cpuFile = cpuDir && join(cpuDir, `${cpuFiles++}`);
    const child = spawn(
      cpuFile ? TIME : process.execPath,
      cpuFile ? ["-f", "%U %S", "-o", cpuFile, process.execPath, ...args] : args,
      // Its own process group, so a file that hangs is ended with everything it started.
      {
        cwd: root,
        env: { ...process.env, ...env, TEST_FILE_TIMEOUT_MS: String(timeout) },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      },
    );
    children.add(child);
    // A file that failed or timed out may leave what it started (services, sandboxes) in its
    // group, holding its output open: ended at once, while they still hold the group's id.
    child.on("exit", (code) => {
      if (code === 0) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    });
    let out = "";
    child.stdout.on("data", (c) => (out += c.toString()));
    child.stderr.on("data", (c) => (out += c.toString()));
    // node's own bound covers the tests; this one a file that hangs after them (an open handle).
    const guard = setTimeout(() => endGroup(child, "SIGKILL"), timeout + 120_000);
    child.on("close", (code) => {
      clearTimeout(guard);
      children.delete(child);
      const ms = Date.now() - started;
      const cpu = cpuFile && readCpu(cpuFile);
      const pass = Number(/ℹ pass (\d+)/.exec(out)?.[1] ?? 0);
      let fail = Number(/ℹ fail (\d+)/.exec(out)?.[1] ?? 0);
      if (code !== 0 && fail === 0) fail = 1;
      process.stdout.write(
        `\n== ${file} (${backend})${attempt > 1 ? ` (run ${attempt})` : ""}: ${pass} passed, ${fail} failed in ${(ms / 1000).toFixed(1)} s${cpu === undefined ? "" : ` (CPU ${cpu.toFixed(1)} s)`}, started at +${Math.round((started - runStarted) / 1000)} s ==\n${out}`,
      );
      resolve({ file, backend, pass, fail, ms, cpu, job });
    });
  });
}

const pgUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
if (watch) {
  if (all.length === 0) {
    console.error(`no test file matches ${filters.join(" ")}`);
    process.exit(1);
  }
  const child = spawn(process.execPath, [...NODE_FLAGS, "--test", "--watch", "--test-reporter=spec", ...all], {
    cwd: root,
    env: { ...process.env, TEST_DATABASE_URL: pgUrl, TEST_DB: "postgres" },
    stdio: "inherit",
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code) => process.exit(code ?? 0));
} else {
  const started = Date.now();
  const pg = { TEST_DATABASE_URL: pgUrl, TEST_DB: "postgres" };
  const pglite = { TEST_DB: "pglite" };
  const results = await runPool([
    ...all.map((file) => ({ file, backend: "PostgreSQL", env: pg })),
    ...dbSuites.map((file) => ({ file, backend: "PGlite", env: pglite })),
  ]);
  // A file that failed runs once more, alone, on a machine no longer busy with the others. A
  // broken feature fails both times; a file that passes alone is reported as flaky by name
  // (so it is fixed, not forgotten) and does not fail the run. TEST_RETRIES=0 turns this off.
  const retries = Number(process.env.TEST_RETRIES ?? 1);
  const flaky = [];
  for (let round = 0; round < retries; round++) {
    const failedNow = results.filter((r) => r.fail > 0);
    if (failedNow.length === 0) break;
    console.log(`\nrunning ${failedNow.length} failed file(s) again, one at a time:`);
    for (const first of failedNow) {
      const again = await runFile({ ...first.job, attempt: round + 2 });
      if (again.fail === 0 && again.pass > 0) flaky.push(first);
      results[results.indexOf(first)] = {
        ...again,
        ms: first.ms + again.ms,
        cpu: first.cpu === undefined ? again.cpu : first.cpu + (again.cpu ?? 0),
      };
    }
  }
  const pass = results.reduce((n, r) => n + r.pass, 0);
  const fail = results.reduce((n, r) => n + r.fail, 0);
  console.log("\nslowest files:");
  for (const r of [...results].sort((a, b) => b.ms - a.ms).slice(0, 15)) {
    console.log(`  ${(r.ms / 1000).toFixed(1).padStart(6)} s  ${r.file} (${r.backend})`);
  }
  if (results.some((r) => r.cpu !== undefined)) {
    const cpu = results.reduce((n, r) => n + (r.cpu ?? 0), 0);
    console.log(`\nmost CPU (${Math.round(cpu)} s of CPU in all the files):`);
    for (const r of [...results].sort((a, b) => (b.cpu ?? 0) - (a.cpu ?? 0)).slice(0, 15)) {
      console.log(`  ${(r.cpu ?? 0).toFixed(1).padStart(6)} s  ${r.file} (${r.backend})`);
    }
  }
  const failed = results.filter((r) => r.fail > 0);
  if (failed.length > 0)
    console.log(`\nfiles with failures:\n${failed.map((r) => `  ${r.file} (${r.backend}): ${r.fail}`).join("\n")}`);
  if (flaky.length > 0)
    console.log(
      `\nFLAKY (failed with the others, passed alone; fix them):\n${flaky.map((r) => `  ${r.file} (${r.backend}): ${r.fail} failed the first time`).join("\n")}`,
    );
  console.log(
    `\n${pass} passed, ${fail} failed${flaky.length > 0 ? `, ${flaky.length} flaky file(s)` : ""} in ${Math.round((Date.now() - started) / 1000)} s (${results.length} file runs)`,
  );
  process.exit(fail === 0 && pass > 0 ? 0 : 1);
}
