import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";
import { tempDirs } from "../../testing/temp-dirs.ts";
import { ensureBundle, runArgs } from "./worker-bundle.ts";
import { defaultWorkerCommand, tsxWorkerCommand } from "./worker-command.ts";

const tempDir = tempDirs("runtime-bundle-");

const run = (path: string) => execFileSync(process.execPath, [path], { encoding: "utf8" }).trim();

describe("worker bundle", () => {
  test("built once, reused while its sources are unchanged, rebuilt when one changes or the bundle is gone", async () => {
    const src = await tempDir();
    const cache = join(await tempDir(), "cache");
    const entry = join(src, "entry.ts");
    await writeFile(entry, `import { word } from "./dep.ts";\nconst n: number = 1;\nconsole.log(word, n);\n`);
    await writeFile(join(src, "dep.ts"), `export const word = "first";\n`);

    const first = await ensureBundle(entry, cache);
    assert.equal(first.built, true);
    assert.equal(run(first.path), "first 1");

    const again = await ensureBundle(entry, cache);
    assert.deepEqual(again, { path: first.path, built: false });

    // An imported file changes: the old bundle is stale and never returned.
    await writeFile(join(src, "dep.ts"), `export const word = "second";\n`);
    const changed = await ensureBundle(entry, cache);
    assert.equal(changed.built, true);
    assert.notEqual(changed.path, first.path);
    assert.equal(run(changed.path), "second 1");

    // The bundle file went missing: rebuilt.
    await unlink(changed.path);
    const rebuilt = await ensureBundle(entry, cache);
    assert.equal(rebuilt.built, true);
    assert.equal(run(rebuilt.path), "second 1");

    // A damaged manifest: rebuilt.
    await writeFile(join(cache, "manifest.json"), "{not json");
    assert.equal((await ensureBundle(entry, cache)).built, true);
    assert.equal((await ensureBundle(entry, cache)).built, false);
  });

  test("run with a V8 code cache: written by the first run, used by the next, a damaged one is replaced", async () => {
    const src = await tempDir();
    const entry = join(src, "entry.ts");
    await writeFile(entry, `export const twice = (n: number) => n * 2;\nconsole.log(twice(21), process.argv.length);\n`);
    const { path } = await ensureBundle(entry, join(await tempDir(), "cache"));
    const launch = () => execFileSync(process.execPath, runArgs(path), { encoding: "utf8" }).trim();
    const cache = `${path}.v8-cache`;
    assert.equal(existsSync(cache), false);
    assert.equal(launch(), "42 2");
    const written = readFileSync(cache);
    assert.ok(written.length > 0);
    assert.equal(launch(), "42 2");
    assert.deepEqual(readFileSync(cache), written, "an accepted cache is left as it is");
    await writeFile(cache, "not a code cache");
    assert.equal(launch(), "42 2");
    assert.ok(readFileSync(cache).length > "not a code cache".length, "rejected, so written again");
  });

  test("a source that does not compile fails the build (callers fall back)", async () => {
    const src = await tempDir();
    const entry = join(src, "entry.ts");
    await writeFile(entry, `import { nothing } from "./missing.ts";\nconsole.log(nothing);\n`);
    await assert.rejects(ensureBundle(entry, join(await tempDir(), "cache")));
  });

  test("the worker command is the bundle of worker/main.ts, or tsx when no bundle can be made", async () => {
    const cache = join(await tempDir(), "cache");
    const bundled = await defaultWorkerCommand(undefined, cache);
    assert.equal(bundled.command, process.execPath);
    assert.ok(bundled.args.at(-1)!.startsWith(cache));
    // The cache directory cannot be created (a file is in the way).
    const blocked = join(await tempDir(), "file");
    await writeFile(blocked, "");
    assert.deepEqual(await defaultWorkerCommand(undefined, join(blocked, "cache")), tsxWorkerCommand());
  });
});
