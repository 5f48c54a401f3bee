import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createRequire, isBuiltin } from "node:module";
import { dirname, extname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { BUNDLE_CACHE, cachedBundles, exists, manifestPath, RECIPE, sha256 } from "./bundle-cache.mjs";

export { BUNDLE_CACHE, CLI_BUNDLE_CACHE, CLI_ENTRIES } from "./bundle-cache.mjs";

const root = new URL("../../../..", import.meta.url).pathname;

/** Old builds are removed once they are this old (a service being restarted may still be reading one). */
const KEEP_OLD_MS = 60 * 60 * 1000;

/** The launcher hands its services' bundles to main.ts in this variable (bin/start.mjs sets it). */
export const BUNDLES_ENV = "PLATFORM_SERVICE_BUNDLES";

type Manifest = {
  recipe: string;
  /** Every workspace file that went in (absolute path) and the sha256 of the bytes read. */
  inputs: Record<string, string>;
  /** The node_modules files the bundles import by absolute path: a reinstall may move them. */
  externals: string[];
  /** Directory of the build in the cache, and each entry's file in it. */
  dir: string;
  entries: Record<string, string>;
};

const LOADERS: Record<string, "ts" | "json" | "js"> = { ".ts": "ts", ".mts": "ts", ".cts": "ts", ".json": "json" };

/**
 * Each entry (name → TypeScript file) and the workspace sources it imports
 * as ES modules in one directory of `cacheDir`, so its process runs on plain
 * Node: under tsx every process also holds a loader thread with its own V8
 * isolate, tsx and esbuild's JavaScript, and each module's transpiled text
 * with an inline source map (~35-50 MiB resident per process). Packages from
 * node_modules are bundled too, but for OUTSIDE's, imported by absolute path
 * as Node itself would resolve them; a dynamic import() becomes a chunk
 * loaded when it runs, so what a service loads lazily stays lazy. Each file
 * keeps its own import.meta.url (and a CommonJS one its __dirname), so what
 * it finds beside itself it still finds. Built again when any input (the
 * workspace's files, the lockfile) changed or went missing.
 */
export async function ensureBundles(
  entries: Record<string, string>,
  cacheDir = BUNDLE_CACHE,
): Promise<{ paths: Record<string, string>; built: boolean }> {
  const cached = await cachedBundles(cacheDir, entries);
  if (cached) return { paths: cached, built: false };
  const { files, inputs, externals } = await build(entries);
  const dir = sha256(files.map((f) => `${f.name}\0${sha256(f.bytes)}`).join("\n")).slice(0, 16);
  await mkdir(cacheDir, { recursive: true });
  const target = join(cacheDir, dir);
  if (!(await exists(target))) {
    const tmp = `${target}.${process.pid}.tmp`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp);
    for (const f of files) await writeFile(join(tmp, f.name), f.bytes);
    // Another process may have written the same bytes first.
    await rename(tmp, target).catch(() => rm(tmp, { recursive: true, force: true }));
  }
  const names = Object.fromEntries(Object.keys(entries).map((name) => [name, `${name}.mjs`]));
  const manifest: Manifest = { recipe: RECIPE, inputs, externals, dir, entries: names };
  await atomicWrite(manifestPath(cacheDir, entries), `${JSON.stringify(manifest)}\n`);
  await removeOld(cacheDir, dir);
  return { paths: Object.fromEntries(Object.keys(entries).map((n) => [n, join(target, `${n}.mjs`)])), built: true };
}

/** The bundles bin/start.mjs built for the services, by service name (empty when the launcher runs under tsx). */
export function bundlesFromEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const value = env[BUNDLES_ENV];
  if (!value) return {};
  const parsed = JSON.parse(value) as unknown;
  return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, string>) : {};
}

const SKIP = Symbol("resolving");

/**
 * Packages that stay outside the bundles, imported by absolute path as Node
 * resolves them: native addons and packages that read files beside their own
 * (argon2's .node, PGlite's WebAssembly and data), and the large ones only a
 * driver or a command loads (the Kubernetes client; x509 with the
 * reflect-metadata global it needs). Every other package is bundled: loading
 * its files one by one through Node's module loader cost a service ~3× the
 * CPU of the same code in one file (all 24 such packages: 1.0-1.3 s against
 * 0.30-0.36 s, 3 runs each).
 */
const OUTSIDE = new Set([
  "@electric-sql/pglite",
  "argon2",
  "@kubernetes/client-node",
  "@peculiar/x509",
  "reflect-metadata",
  "tsyringe",
]);

/** esbuild's `require` for a bundled CommonJS module finds this one (its own throws in an ES module). */
const REQUIRE_SHIM =
  'import { createRequire as __platformCreateRequire } from "node:module"; const require = __platformCreateRequire(import.meta.url);';

/** The package a node_modules path belongs to (`@scope/name` or `name`). */
function packageOf(path: string): string {
  const [first, second] = path.slice(path.lastIndexOf("/node_modules/") + "/node_modules/".length).split("/");
  return first?.startsWith("@") ? `${first}/${second}` : (first ?? "");
}

/** A CommonJS file's own __dirname and __filename, which an ES module bundle does not define. */
function withCommonJsPaths(path: string, text: string): string {
  if (!/\b__(dirname|filename)\b/.test(text) || /\b(const|let|var)\s+__(dirname|filename)\b/.test(text)) return text;
  return `var __filename = ${JSON.stringify(path)}, __dirname = ${JSON.stringify(dirname(path))};\n${text}`;
}
const IMPORT_META_URL = /(?<![\w$.])import\.meta\.url(?![\w$])/g;

async function build(entries: Record<string, string>) {
  const esbuild = loadEsbuild();
  const inputs: Record<string, string> = {};
  const externals = new Set<string>();
  const files = new Map<string, Uint8Array>();
  try {
    // One build per entry: code splitting across entries would move what two
    // services share into chunks that run before the rest of each service's
    // modules (esbuild's split chunks do not keep the import order); alone, an
    // entry is split only at its own dynamic imports.
    for (const [name, entry] of Object.entries(entries)) {
      const result = await esbuild.build({
        entryPoints: { [name]: entry },
        bundle: true,
        splitting: true,
        format: "esm",
        platform: "node",
        target: `node${process.versions.node}`,
        // As tsx transpiles: a class's or function's name survives the renaming that one scope needs.
        keepNames: true,
        // Node's own resolution for what stays outside: no `module` field or condition.
        mainFields: ["main"],
        conditions: [],
        outdir: "/bundle",
        outExtension: { ".js": ".mjs" },
        chunkNames: "chunk-[hash]",
        write: false,
        logLevel: "silent",
        plugins: [workspaceOnly(inputs, externals)],
        // A CommonJS package bundled into ES modules still requires Node's own modules.
        banner: { js: REQUIRE_SHIM },
      });
      for (const f of result.outputFiles) files.set(f.path.slice("/bundle/".length), f.contents);
    }
  } finally {
    // Its service process holds tens of MiB for a next call that does not come.
    await esbuild.stop();
  }
  // tsconfig.json decides how the sources are transpiled, the lockfile where the packages outside are.
  for (const file of ["tsconfig.json", "pnpm-lock.yaml"]) {
    const path = join(root, file);
    const bytes = await readFile(path).catch(() => undefined);
    if (bytes) inputs[path] = sha256(bytes);
  }
  return {
    files: [...files].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => a.name.localeCompare(b.name)),
    inputs,
    externals: [...externals].sort(),
  };
}

/**
 * Bundles workspace sources only: a package from node_modules is imported by
 * its absolute path, and each source's import.meta.url becomes its own path.
 * Records every input's hash and every outside file.
 */
function workspaceOnly(inputs: Record<string, string>, externals: Set<string>): EsbuildPlugin {
  return {
    name: "workspace-only",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === SKIP) return undefined;
        if (isBuiltin(args.path)) return { path: args.path, external: true };
        const r = await b.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          importer: args.importer,
          pluginData: SKIP,
        });
        if (r.errors.length > 0) {
          // A package's optional dependency that is not installed (pg's pg-native): its require fails at run time, as it would unbundled.
          if (args.importer.includes("/node_modules/")) return { path: args.path, external: true };
          return { errors: r.errors };
        }
        // Workspace packages resolve through their node_modules symlink to their sources: bundled.
        if (r.external || !r.path.includes("/node_modules/")) return { path: r.path, external: r.external };
        // A package a dynamic import() loads stays outside too: esbuild gives a split chunk of a
        // CommonJS module only a default export, where Node's loader also names its exports.
        if (args.kind !== "dynamic-import" && !OUTSIDE.has(packageOf(r.path))) return { path: r.path };
        externals.add(r.path);
        return { path: pathToFileURL(r.path).href, external: true };
      });
      b.onLoad({ filter: /\.([cm]?ts|[cm]?js|json)$/ }, async (args) => {
        const bytes = await readFile(args.path);
        const installed = args.path.includes("/node_modules/");
        // A package's files are decided by the lockfile (an input), the workspace's by their own bytes.
        if (!installed) inputs[args.path] = sha256(bytes);
        const loader = LOADERS[extname(args.path)] ?? "js";
        if (loader === "json") return { contents: bytes, loader };
        const here = JSON.stringify(pathToFileURL(args.path).href);
        const text = bytes.toString("utf8").replace(IMPORT_META_URL, here);
        return { contents: installed ? withCommonJsPaths(args.path, text) : text, loader };
      });
    },
  };
}

/** The part of esbuild's API used here. */
type Esbuild = {
  stop(): Promise<void>;
  build(options: Record<string, unknown> & { write: false; plugins: EsbuildPlugin[] }): Promise<{
    outputFiles: { path: string; contents: Uint8Array }[];
  }>;
};
type ResolveArgs = { path: string; kind: string; resolveDir: string; importer: string; pluginData?: unknown };
type EsbuildPlugin = {
  name: string;
  setup(build: {
    resolve(
      path: string,
      options: Omit<ResolveArgs, "path">,
    ): Promise<{ path: string; external: boolean; errors: unknown[] }>;
    onResolve(
      options: { filter: RegExp },
      resolve: (args: ResolveArgs) => Promise<{ path: string; external?: boolean } | { errors: unknown[] } | undefined>,
    ): void;
    onLoad(
      options: { filter: RegExp },
      load: (args: { path: string }) => Promise<{ contents: Uint8Array | string; loader: string }>,
    ): void;
  }): void;
};

/** The esbuild tsx transpiles with (as the runtime's worker bundle does): no dependency of its own. */
function loadEsbuild(): Esbuild {
  const tsx = createRequire(import.meta.url).resolve("tsx/package.json");
  return createRequire(tsx)("esbuild") as Esbuild;
}

async function atomicWrite(path: string, data: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

async function removeOld(dir: string, keep: string): Promise<void> {
  const cutoff = Date.now() - KEEP_OLD_MS;
  for (const name of await readdir(dir)) {
    if (name === keep || name.startsWith("manifest-")) continue;
    const path = join(dir, name);
    const s = await stat(path).catch(() => undefined);
    if (s && s.mtimeMs < cutoff) await rm(path, { recursive: true, force: true });
  }
}
