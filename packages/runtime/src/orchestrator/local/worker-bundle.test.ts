import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync, statSync, utimesSync } from "node:fs";
import { unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
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
    assert.deepEqual(again, { path: first.path, built: false, read: 2 });

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

  test("a check reads only the inputs whose stat moved since this process read them", async () => {
    const src = await tempDir();
    const cache = join(await tempDir(), "cache");
    const entry = join(src, "entry.ts");
    await writeFile(entry, `import { word } from "./dep.ts";\nconsole.log(word);\n`);
    await writeFile(join(src, "dep.ts"), `export const word = "first";\n`);
    assert.equal((await ensureBundle(entry, cache)).built, true);
    // Just written: their hashes are not kept yet (a second write in the same timestamp tick could keep the stat).
    assert.equal((await ensureBundle(entry, cache)).read, 2);
    await sleep(1100);
    assert.equal((await ensureBundle(entry, cache)).read, 2, "read once more, now settled");
    const quiet = await ensureBundle(entry, cache);
    assert.equal(quiet.built, false);
    assert.equal(quiet.read, 0, "both known by their stat");

    // Same size, same mtime: the write still moves ctime.
    const dep = join(src, "dep.ts");
    const { mtime } = statSync(dep);
    await writeFile(dep, `export const word = "secon";\n`);
    utimesSync(dep, mtime, mtime);
    const changed = await ensureBundle(entry, cache);
    assert.equal(changed.built, true);
    assert.equal(changed.read, 1);
    assert.equal(run(changed.path), "secon");
  });

  test("run with a V8 code cache: written by the first run, used by the next, a damaged one is replaced", async () => {
    const src = await tempDir();
    const entry = join(src, "entry.ts");
    await writeFile(
      entry,
      `export const twice = (n: number) => n * 2;\nconsole.log(twice(21), process.argv.length);\n`,
    );
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

  // Node's default lets a worker's semi-space grow to 16 MiB: under a token stream its scavenges
  // grew past 1 ms and it ran mark-compacts of up to 11 ms (issue 26, token-latency).
  test("a worker runs with V8's semi-space bounded at 2 MiB, bundled or under tsx", async () => {
    const cache = join(await tempDir(), "cache");
    for (const { args } of [await defaultWorkerCommand(undefined, cache), tsxWorkerCommand()]) {
      const flags = args.slice(
        0,
        args.findIndex((a) => a === "-e" || a === "--import"),
      );
      assert.ok(flags.includes("--max-semi-space-size=2"), `node flags: ${flags.join(" ")}`);
      // Node honours them: after a burst of short-lived objects the new space (two semi-spaces) stays within 4 MiB.
      const probe = `const w=new Array(1e5);for(let i=0;i<3e6;i++)w[i%1e5]={i,s:"x"+i};const s=require("node:v8").getHeapSpaceStatistics().find((x)=>x.space_name==="new_space");console.log(s.space_size)`;
      const size = Number(execFileSync(process.execPath, [...flags, "-e", probe], { encoding: "utf8" }).trim());
      assert.ok(size <= 4 * 2 ** 20, `new space ${size} bytes`);
    }
  });

  // The bundle is CommonJS: code of the worker's dependencies that only works
  // as an ES module (import.meta.url at load time) breaks every tenant there.
  test("the real worker, bundled, starts and serves", { timeout: 60_000 }, async () => {
    const { command, args } = await defaultWorkerCommand(undefined, join(await tempDir(), "cache"));
    const tenant = "00000000-0000-4000-8000-000000000001";
    const child = spawn(command, args, {
      env: {
        ...process.env,
        INTERNAL_TLS: "off",
        TENANT_ID: tenant,
        ORG_ID: tenant,
        AGENTS_GRPC_URL: "http://127.0.0.1:9",
        PORT: "0",
        HOST: "127.0.0.1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`not serving within 30 s:\n${out}`)), 30_000);
        child.on("exit", (code) => reject(new Error(`worker exited (${code}):\n${out}`)));
        const check = setInterval(() => {
          const m = /"port":(\d+)[^\n]*tenant worker serving/.exec(out);
          if (m) {
            clearInterval(check);
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        }, 50);
      });
      const res = await fetch(`http://127.0.0.1:${port}/livez`);
      assert.equal(res.status, 200);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
