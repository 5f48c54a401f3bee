import { PLATFORM_ENTRIES } from "../launcher/bundle-cache.mjs";
import { ensureBundles } from "../launcher/bundles.ts";
import { SERVICE_ENTRIES, SERVICE_NODE_ARGS } from "../launcher/services.ts";

type ServiceName = keyof typeof SERVICE_ENTRIES;

/**
 * Node's arguments for each service as `bash scripts/run.sh` runs it: the
 * launcher's V8 flags and a bundle of its sources on plain Node
 * (launcher/bundles.ts), the same build bin/start.mjs makes and caches.
 * Under tsx each service also ran a loader thread and transpiled its modules
 * as they loaded: ~4 s more CPU a platform start of four services. Without
 * the flags, V8 also optimized PGlite's WebAssembly in each service.
 */
export async function serviceArgv(): Promise<Record<ServiceName, string[]>> {
  const { paths } = await ensureBundles(PLATFORM_ENTRIES);
  const names = Object.keys(SERVICE_ENTRIES) as ServiceName[];
  return Object.fromEntries(names.map((n) => [n, [...SERVICE_NODE_ARGS[n], paths[n] as string]])) as Record<
    ServiceName,
    string[]
  >;
}
