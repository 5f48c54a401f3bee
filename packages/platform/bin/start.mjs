#!/usr/bin/env node
// `bash scripts/run.sh` starts the platform here: the launcher and its services
// run from bundles of their sources (launcher/bundles.ts says what that saves),
// built or found up to date by a short-lived process under tsx; if they cannot
// be built, everything runs through tsx as `pnpm start` does.
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";

const command = fileURLToPath(new URL("../src/launcher/bundle-command.ts", import.meta.url));
const build = spawnSync(process.execPath, ["--import", "tsx", command], {
  stdio: ["ignore", "pipe", "inherit"],
  encoding: "utf8",
});
let bundles;
try {
  if (build.status === 0) bundles = JSON.parse(build.stdout);
} catch {}
if (bundles?.launcher) {
  process.env.PLATFORM_SERVICE_BUNDLES = JSON.stringify(bundles.services);
  await import(pathToFileURL(bundles.launcher).href);
} else {
  process.stderr.write(
    `platform: could not bundle the services (${build.error?.message ?? `exit ${build.status ?? build.signal}`}); running them through tsx\n`,
  );
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/main.ts");
}
