import { join } from "node:path";
import { ensureBundles } from "../launcher/bundles.ts";
import { SERVICE_ENTRIES } from "../launcher/services.ts";

const root = new URL("../../../../", import.meta.url).pathname;

/**
 * The services as `bash scripts/run.sh` runs them: bundles of their sources
 * on plain Node (launcher/bundles.ts), the same build bin/start.mjs makes and
 * caches. Under tsx each service also ran a loader thread and transpiled its
 * modules as they loaded: ~4 s more CPU a platform start of four services.
 */
export async function serviceBundles(): Promise<Record<string, string>> {
  const { paths } = await ensureBundles({
    launcher: join(root, "packages/platform/src/main.ts"),
    ...SERVICE_ENTRIES,
  });
  return paths;
}
