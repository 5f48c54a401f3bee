#!/usr/bin/env node
// Runs every *.test.ts under packages/ with node's test runner (through tsx):
// first against the PostgreSQL server (TEST_DATABASE_URL, default the local
// one), then the *.db.test.ts suites again on embedded PGlite, so each
// database suite passes on both backends. Prints one closing line.
//   node scripts/run-tests.mjs [filter...]   only files whose path contains a filter
import { spawn } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const filters = process.argv.slice(2);

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

function run(label, files, env) {
  return new Promise((resolve) => {
    if (files.length === 0) return resolve({ pass: 0, fail: 0 });
    console.log(`\n== ${label}: ${files.length} files ==`);
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--test", "--test-reporter=spec", `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`, "--test-timeout=180000", ...files],
      { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] },
    );
    let tail = "";
    child.stdout.on("data", (chunk) => {
      process.stdout.write(chunk);
      tail = (tail + chunk.toString()).slice(-4000);
    });
    child.on("close", (code) => {
      const pass = Number(/ℹ pass (\d+)/.exec(tail)?.[1] ?? 0);
      let fail = Number(/ℹ fail (\d+)/.exec(tail)?.[1] ?? 0);
      if (code !== 0 && fail === 0) fail = 1;
      resolve({ pass, fail });
    });
  });
}

const pgUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const first = await run("all suites, PostgreSQL", all, { TEST_DATABASE_URL: pgUrl, TEST_DB: "postgres" });
const second = await run("database suites, PGlite", dbSuites, { TEST_DB: "pglite" });
const pass = first.pass + second.pass;
const fail = first.fail + second.fail;
console.log(`\n${pass} passed, ${fail} failed`);
process.exit(fail === 0 && pass > 0 ? 0 : 1);
