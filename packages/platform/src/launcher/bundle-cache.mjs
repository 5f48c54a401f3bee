// The part of the bundle cache (bundles.ts) that plain Node runs: bin/platform.mjs
// finds the CLI's bundle here on every command, without tsx, and bundles.ts
// finds every other bundle the same way before it builds one.
import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";

const root = new URL("../../../..", import.meta.url).pathname;

/** Not in the repository: node_modules is never committed, and a fresh install starts without it. */
export const BUNDLE_CACHE = join(root, "node_modules/.cache/platform-bundles");

/** The CLI's builds, apart from the services': each cache removes the builds its own manifest no longer names. */
export const CLI_BUNDLE_CACHE = join(root, "node_modules/.cache/platform-cli");

/** The command-line client's entry (bin/platform.mjs runs its bundle). */
export const CLI_ENTRIES = { cli: join(root, "packages/platform/src/cli/main.ts") };

/**
 * The launcher's entry and each service's, in this order (the order is part
 * of the cache's key): bin/start.mjs finds their bundles here on plain Node,
 * services.ts names the services from it.
 */
export const PLATFORM_ENTRIES = {
  launcher: join(root, "packages/platform/src/main.ts"),
  identity: join(root, "packages/identity/src/main.ts"),
  compute: join(root, "packages/compute/src/main.ts"),
  agents: join(root, "packages/agents/src/main.ts"),
  runtime: join(root, "packages/runtime/src/router/main.ts"),
  e2b: join(root, "packages/e2b-compat/src/main.ts"),
};

/** What else decides the bundles' bytes besides their inputs. A change here makes every cached build stale. */
export const RECIPE = `esm splitting keepNames packages-inside v2 node ${process.version}`;

export const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** Where the manifest of a build of `entries` (name → source file) is kept in `cacheDir`. */
export const manifestPath = (cacheDir, entries) =>
  join(cacheDir, `manifest-${sha256(JSON.stringify(entries)).slice(0, 12)}.json`);

/**
 * Each entry's bundle file when the cached build is current: made by this
 * recipe (Node's version in it), every input's bytes as they were (sha256),
 * every package file it imports still where it was, every file present.
 * Otherwise undefined (build again).
 */
export async function cachedBundles(cacheDir, entries) {
  const m = await readManifest(manifestPath(cacheDir, entries));
  if (!m || m.recipe !== RECIPE) return undefined;
  const paths = Object.fromEntries(Object.entries(m.entries).map(([name, file]) => [name, join(cacheDir, m.dir, file)]));
  const checks = await Promise.all([
    ...Object.entries(m.inputs).map(async ([path, hash]) => {
      try {
        return sha256(await readFile(path)) === hash;
      } catch {
        return false;
      }
    }),
    ...m.externals.map(exists),
    ...Object.values(paths).map(exists),
  ]);
  return Object.keys(m.inputs).length > 0 && checks.every(Boolean) ? paths : undefined;
}

async function readManifest(path) {
  try {
    const m = JSON.parse(await readFile(path, "utf8"));
    if (typeof m.recipe !== "string" || typeof m.dir !== "string" || !m.inputs || !m.entries || !m.externals)
      return undefined;
    return m;
  } catch {
    return undefined;
  }
}

export async function exists(path) {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
