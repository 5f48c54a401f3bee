import { createHash } from "node:crypto";
import type { Stats } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { extname, join } from "node:path";

/**
 * What else decides the bundle's bytes besides its inputs: the options below
 * and the toolchain. A change here makes every cached bundle stale.
 */
const RECIPE = `cjs node20 v3 node ${process.version}`;

/** Old bundles are removed once they are this old (a worker being spawned may still read a fresh one). */
const KEEP_OLD_MS = 60 * 60 * 1000;

interface Manifest {
  recipe: string;
  /** Every file that went into the bundle (absolute path) and the sha256 of the bytes read. */
  inputs: Record<string, string>;
  /** File name of the bundle in the cache directory. */
  bundle: string;
}

export interface BundleResult {
  /** Absolute path of the bundle (one CommonJS script). */
  path: string;
  /** Whether this call had to build it (no bundle yet, or a stale one). */
  built: boolean;
  /** Inputs this call read and hashed to check the bundle (the rest were known by their unchanged stat). */
  read: number;
}

const sha256 = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");

const LOADERS: Record<string, "ts" | "json" | "js"> = { ".ts": "ts", ".mts": "ts", ".cts": "ts", ".json": "json" };

/**
 * The entry point and everything it imports (workspace sources and
 * node_modules) as one CommonJS script in `cacheDir`, so a process starts
 * without tsx transpiling its module graph (CommonJS, not ESM: Node 20 can
 * code-cache only scripts, see `runArgs`). The cache is keyed by the content of the
 * files that went in: each call checks them (reading again those whose stat
 * moved since this process last read them) and rebuilds when any changed
 * or went missing, so a stale bundle is never returned. Concurrent callers
 * (processes) may both build; the writes are atomic renames of equal bytes.
 */
export async function ensureBundle(entry: string, cacheDir: string): Promise<BundleResult> {
  const manifestPath = join(cacheDir, "manifest.json");
  const current = await readManifest(manifestPath);
  const check = { read: 0 };
  if (current && current.recipe === RECIPE && (await unchanged(current.inputs, check))) {
    const path = join(cacheDir, current.bundle);
    if (await exists(path)) return { path, built: false, read: check.read };
  }
  const { bytes, inputs } = await build(entry);
  const name = `worker-${sha256(bytes).slice(0, 16)}.cjs`;
  await mkdir(cacheDir, { recursive: true });
  const path = join(cacheDir, name);
  await atomicWrite(path, bytes);
  await atomicWrite(manifestPath, `${JSON.stringify({ recipe: RECIPE, inputs, bundle: name } satisfies Manifest)}\n`);
  await removeOld(cacheDir, name);
  return { path, built: true, read: check.read };
}

/**
 * Runs a bundle with V8's code cache, which Node 20 offers only through
 * vm.Script (module.enableCompileCache and NODE_COMPILE_CACHE came in Node
 * 22): the bundle compiles with `<bundle>.v8-cache` when that exists and V8
 * accepts it; otherwise the process writes one for the next, a few seconds
 * in (after a spare's warm-up has compiled the request path too) or at exit,
 * whichever comes first.
 */
const LAUNCHER = `
const fs = require("node:fs");
const path = require("node:path");
const vm = require("node:vm");
const { Module, createRequire } = require("node:module");
const file = process.argv[1];
const cacheFile = file + ".v8-cache";
let cachedData;
try { cachedData = fs.readFileSync(cacheFile); } catch {}
const script = new vm.Script(Module.wrap(fs.readFileSync(file, "utf8")), {
  filename: file,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
if (cachedData === undefined || script.cachedDataRejected) {
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    const tmp = cacheFile + "." + process.pid + ".tmp";
    try {
      fs.writeFileSync(tmp, script.createCachedData());
      fs.renameSync(tmp, cacheFile);
    } catch {
      fs.rmSync(tmp, { force: true });
    }
  };
  setTimeout(write, 3000).unref();
  process.once("exit", write);
}
const mod = { exports: {} };
script.runInThisContext()(mod.exports, createRequire(file), mod, file, path.dirname(file));
`;

/** Node's arguments that run the bundle at `path` (its process.argv[1] is the bundle). */
export function runArgs(path: string): string[] {
  return ["-e", LAUNCHER, path];
}

/** Builds under way in this process: esbuild's service process is stopped when the last one ends. */
let building = 0;

async function build(entry: string): Promise<{ bytes: Uint8Array; inputs: Record<string, string> }> {
  const esbuild = loadEsbuild();
  building++;
  try {
    return await buildWith(esbuild, entry);
  } finally {
    // esbuild keeps its service process (~40-80 MiB resident after a bundle) for the next call; a bundle is
    // built at most once per change of its inputs, so it is stopped (a later call starts it again).
    if (--building === 0) await esbuild.stop();
  }
}

async function buildWith(
  esbuild: Esbuild,
  entry: string,
): Promise<{ bytes: Uint8Array; inputs: Record<string, string> }> {
  const inputs: Record<string, string> = {};
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    // import() of a Node built-in (the OpenTelemetry exporter loads http so) as require(): a dynamic
    // import inside the vm.Script the launcher runs did not always settle, and the worker's spans never left.
    supported: { "dynamic-import": false },
    write: false,
    logLevel: "silent",
    plugins: [
      {
        // Reads every input itself so the hashes are of exactly the bytes bundled
        // (a file edited during the build makes the next call rebuild).
        name: "hash-inputs",
        setup(b) {
          b.onLoad({ filter: /.*/ }, async (args) => {
            const contents = await readFile(args.path);
            inputs[args.path] = sha256(contents);
            return { contents, loader: LOADERS[extname(args.path)] ?? "js" };
          });
        },
      },
    ],
  });
  const out = result.outputFiles[0];
  if (!out) throw new Error(`bundling ${entry} produced no output`);
  return { bytes: out.contents, inputs };
}

/** The part of esbuild's API used here. */
interface Esbuild {
  stop(): Promise<void>;
  build(
    options: Record<string, unknown> & { write: false; plugins: EsbuildPlugin[] },
  ): Promise<{ outputFiles: { contents: Uint8Array }[] }>;
}
interface EsbuildPlugin {
  name: string;
  setup(build: {
    onLoad(
      options: { filter: RegExp },
      load: (args: { path: string }) => Promise<{ contents: Uint8Array; loader: string }>,
    ): void;
  }): void;
}

/**
 * The esbuild that tsx (which runs the worker when there is no bundle)
 * transpiles with: no dependency of its own, and the same compiler either
 * way. Loaded only when a bundle must be built.
 */
function loadEsbuild(): Esbuild {
  const tsx = createRequire(import.meta.url).resolve("tsx/package.json");
  return createRequire(tsx)("esbuild") as Esbuild;
}

async function readManifest(path: string): Promise<Manifest | undefined> {
  try {
    const m = JSON.parse(await readFile(path, "utf8")) as Partial<Manifest>;
    if (typeof m.recipe !== "string" || typeof m.bundle !== "string" || typeof m.inputs !== "object" || !m.inputs)
      return undefined;
    return m as Manifest;
  } catch {
    return undefined;
  }
}

/**
 * The inputs this process has hashed: the hash with the file's stat taken
 * just before it was read. The local orchestrator checks the bundle before
 * every worker it starts (a spare each cold start): reading and hashing its
 * ~600 inputs took 100-170 ms (50-115 ms of CPU) of the router's process on a
 * 2.1 GHz Xeon, a stat of each ~30 ms. A file is read again when its stat
 * moved: any write changes ctime (which, unlike mtime, no program can set
 * back), a rename the inode, a truncation the size.
 */
const known = new Map<string, { stat: string; hash: string }>();

/**
 * A file changed this recently could change again within the same
 * timestamp tick (the kernel's coarse clock), leaving its stat as it was:
 * its hash is not kept (git's "racily clean" entries).
 */
const SETTLED_MS = 1000;

const statKey = (s: Stats) => `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;

async function unchanged(inputs: Record<string, string>, check: { read: number }): Promise<boolean> {
  const checks = await Promise.all(
    Object.entries(inputs).map(async ([path, hash]) => {
      try {
        const s = await stat(path);
        const key = statKey(s);
        const memo = known.get(path);
        if (memo?.stat === key) return memo.hash === hash;
        check.read++;
        const now = sha256(await readFile(path));
        if (Date.now() - Math.max(s.mtimeMs, s.ctimeMs) > SETTLED_MS) known.set(path, { stat: key, hash: now });
        else known.delete(path);
        return now === hash;
      } catch {
        known.delete(path);
        return false;
      }
    }),
  );
  return checks.length > 0 && checks.every(Boolean);
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

async function atomicWrite(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

async function removeOld(dir: string, keep: string): Promise<void> {
  const cutoff = Date.now() - KEEP_OLD_MS;
  for (const name of await readdir(dir)) {
    // The bundle and its code cache (`<bundle>.v8-cache`) stay.
    if (name.startsWith(keep) || !name.startsWith("worker-")) continue;
    const path = join(dir, name);
    const s = await stat(path).catch(() => undefined);
    if (s && s.mtimeMs < cutoff) await rm(path, { force: true });
  }
}
