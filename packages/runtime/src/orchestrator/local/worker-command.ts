import type { Logger } from "pino";
import { ensureBundle, runArgs } from "./worker-bundle.ts";
import type { WorkerCommand } from "./worker-process.ts";

const MAIN = new URL("../../worker/main.ts", import.meta.url).pathname;
const PACKAGE = new URL("../../../", import.meta.url).pathname;
/** Not in the repository: node_modules is never committed, and a fresh install starts without it. */
const BUNDLE_CACHE = new URL("../../../node_modules/.cache/runtime-worker/", import.meta.url).pathname;

/** `node --import tsx packages/runtime/src/worker/main.ts`: transpiles the worker's module graph at every start. */
export function tsxWorkerCommand(): WorkerCommand {
  return { command: process.execPath, args: ["--import", "tsx", MAIN], cwd: PACKAGE };
}

/**
 * The worker as one prebuilt script (built on first use, rebuilt when any
 * of its sources changed; see ./worker-bundle.ts), which starts several times
 * faster than under tsx; tsx when the bundle cannot be built.
 */
export async function defaultWorkerCommand(log?: Logger, cacheDir = BUNDLE_CACHE): Promise<WorkerCommand> {
  try {
    const { path, built } = await ensureBundle(MAIN, cacheDir);
    if (built) log?.info({ path }, "worker bundle built");
    return { command: process.execPath, args: runArgs(path), cwd: PACKAGE };
  } catch (err) {
    log?.warn({ err: String(err) }, "worker bundle unavailable; workers start under tsx");
    return tsxWorkerCommand();
  }
}
