#!/usr/bin/env node
// The command-line client runs from a bundle of its sources on plain Node, as
// the services do (src/launcher/bundles.ts): under tsx every command spent
// ~0.5 s of CPU starting a loader thread and transpiling its modules before
// it did anything. The bundle is found by checking the cached build's inputs
// (a few ms); when a source changed, a short-lived process under tsx builds
// it again; if it cannot be built, the command runs through tsx.
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CLI_BUNDLE_CACHE, CLI_ENTRIES, cachedBundles } from "../src/launcher/bundle-cache.mjs";

let bundle = (await cachedBundles(CLI_BUNDLE_CACHE, CLI_ENTRIES))?.cli;
if (!bundle) {
  const command = fileURLToPath(new URL("../src/launcher/bundle-command.ts", import.meta.url));
  const build = spawnSync(process.execPath, ["--import", "tsx", command, "--cli"], {
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
  });
  try {
    if (build.status === 0) bundle = JSON.parse(build.stdout).cli;
  } catch {}
}
if (bundle) {
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli/main.ts");
}
