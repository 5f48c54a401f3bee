#!/usr/bin/env node
// `bash scripts/run.sh` starts the platform here: the launcher and its services
// run from bundles of their sources (launcher/bundles.ts says what that saves).
// The bundles are found by checking the cached build's inputs on plain Node (a
// few ms; under tsx that check alone cost ~1 s of CPU a start); when a source
// changed, a short-lived process under tsx builds them again, so that neither
// tsx nor esbuild stays in this process; if they cannot be built, everything
// runs through tsx as `pnpm start` does.
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { BUNDLE_CACHE, cachedBundles, PLATFORM_ENTRIES } from "../src/launcher/bundle-cache.mjs";

let bundles;
const cached = await cachedBundles(BUNDLE_CACHE, PLATFORM_ENTRIES);
if (cached) {
  const { launcher, ...services } = cached;
  bundles = { launcher, services };
} else {
  const command = fileURLToPath(new URL("../src/launcher/bundle-command.ts", import.meta.url));
  const build = spawnSync(process.execPath, ["--import", "tsx", command], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
  });
  try {
    if (build.status === 0) bundles = JSON.parse(build.stdout);
  } catch {}
  if (!bundles?.launcher)
    process.stderr.write(
      `platform: could not bundle the services (${build.error?.message ?? `exit ${build.status ?? build.signal}`}); running them through tsx\n`,
    );
}
if (bundles?.launcher) {
  process.env.PLATFORM_SERVICE_BUNDLES = JSON.stringify(bundles.services);
  await import(pathToFileURL(bundles.launcher).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/main.ts");
}
