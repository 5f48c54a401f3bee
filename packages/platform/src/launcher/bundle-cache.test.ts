import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { CLI_BUNDLE_CACHE, CLI_ENTRIES, cachedBundles } from "./bundle-cache.mjs";
import { ensureBundles } from "./bundles.ts";

const dir = mkdtempSync(join(tmpdir(), "bundle-cache-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("a cached build is found while its inputs are unchanged, and not once one changes or goes", async () => {
  const cache = join(dir, "cache");
  const entry = join(dir, "entry.ts");
  const dep = join(dir, "dep.ts");
  writeFileSync(dep, "export const word: string = 'one';\n");
  writeFileSync(entry, "import { word } from './dep.ts';\nconsole.log(word);\n");
  assert.equal(await cachedBundles(cache, { entry }), undefined, "nothing built yet");
  const first = await ensureBundles({ entry }, cache);
  assert.equal(first.built, true);
  assert.deepEqual(await cachedBundles(cache, { entry }), first.paths);
  assert.equal(execFileSync(process.execPath, [first.paths.entry as string], { encoding: "utf8" }), "one\n");
  assert.equal((await ensureBundles({ entry }, cache)).built, false, "found, not built again");

  writeFileSync(dep, "export const word: string = 'two';\n");
  assert.equal(await cachedBundles(cache, { entry }), undefined, "an input changed");
  const second = await ensureBundles({ entry }, cache);
  assert.equal(second.built, true);
  assert.equal(execFileSync(process.execPath, [second.paths.entry as string], { encoding: "utf8" }), "two\n");

  rmSync(second.paths.entry as string);
  assert.equal(await cachedBundles(cache, { entry }), undefined, "the bundle file went");
});

test("bin/platform.mjs runs the CLI from its bundle, built on first use", async () => {
  const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
  const out = execFileSync(process.execPath, [bin, "--version"], { encoding: "utf8" });
  assert.match(out, /^platform \d+\.\d+\.\d+\n$/);
  const paths = await cachedBundles(CLI_BUNDLE_CACHE, CLI_ENTRIES);
  assert.ok(paths?.cli, "the CLI's bundle is in the cache and current");
});
