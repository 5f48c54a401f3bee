// `node --import tsx packages/platform/src/launcher/bundle-command.ts [--cli]`:
// builds (or finds up to date) the bundles of the launcher and of every
// service and prints their paths as one JSON line, { launcher, services: {
// name: path } }; with --cli, the command-line client's, { cli: path }.
// bin/start.mjs and bin/platform.mjs run it as a process of their own, so that
// neither tsx nor esbuild stays in their memory.
import { PLATFORM_ENTRIES } from "./bundle-cache.mjs";
import { CLI_BUNDLE_CACHE, CLI_ENTRIES, ensureBundles } from "./bundles.ts";

const started = Date.now();
if (process.argv.includes("--cli")) {
  const { paths } = await ensureBundles(CLI_ENTRIES, CLI_BUNDLE_CACHE);
  process.stdout.write(`${JSON.stringify(paths)}\n`);
} else {
  const { paths, built } = await ensureBundles(PLATFORM_ENTRIES);
  const { launcher, ...services } = paths;
  if (built) process.stderr.write(`platform: built the services' bundles in ${Date.now() - started} ms\n`);
  process.stdout.write(`${JSON.stringify({ launcher, services })}\n`);
}
