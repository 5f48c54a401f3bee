// `node --import tsx packages/platform/src/launcher/bundle-command.ts`: builds
// (or finds up to date) the bundles of the launcher and of every service and
// prints their paths as one JSON line, { launcher, services: { name: path } }.
// bin/start.mjs runs it as a process of its own, so that neither tsx nor
// esbuild stays in the launcher's memory.
import { fileURLToPath } from "node:url";
import { ensureBundles } from "./bundles.ts";
import { SERVICE_ENTRIES } from "./services.ts";

const started = Date.now();
const { paths, built } = await ensureBundles({
  launcher: fileURLToPath(new URL("../main.ts", import.meta.url)),
  ...SERVICE_ENTRIES,
});
const { launcher, ...services } = paths;
if (built) process.stderr.write(`platform: built the services' bundles in ${Date.now() - started} ms\n`);
process.stdout.write(`${JSON.stringify({ launcher, services })}\n`);
