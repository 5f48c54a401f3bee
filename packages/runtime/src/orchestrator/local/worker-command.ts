import { SEMI_SPACE_MIB } from "@platform/config";
import type { Logger } from "pino";
import { ensureBundle, runArgs } from "./worker-bundle.ts";
import type { WorkerCommand } from "./worker-process.ts";

const MAIN = new URL("../../worker/main.ts", import.meta.url).pathname;
const PACKAGE = new URL("../../../", import.meta.url).pathname;
/** Not in the repository: node_modules is never committed, and a fresh install starts without it. */
const BUNDLE_CACHE = new URL("../../../node_modules/.cache/runtime-worker/", import.meta.url).pathname;

/**
 * The Node flags a worker runs with: V8's semi-space bounded as the
 * services' (SEMI_SPACE_MIB). With Node's default (up to 16 MiB) a worker
 * relaying the token-latency figure's streams (12 s) paused for 2-6
 * mark-compact steps of up to 11 ms and 0-4 scavenges over 1 ms in each of 7
 * runs; bounded, for no mark-compact and 0-3 such scavenges in each of 7 (a
 * GC probe in the worker, issue 26), at the same resident size.
 */
export const WORKER_NODE_ARGS: readonly string[] = [`--max-semi-space-size=${SEMI_SPACE_MIB}`];

/** `node --import tsx packages/runtime/src/worker/main.ts`: transpiles the worker's module graph at every start. */
export function tsxWorkerCommand(): WorkerCommand {
  return { command: process.execPath, args: [...WORKER_NODE_ARGS, "--import", "tsx", MAIN], cwd: PACKAGE };
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
    return { command: process.execPath, args: [...WORKER_NODE_ARGS, ...runArgs(path)], cwd: PACKAGE };
  } catch (err) {
    log?.warn({ err: String(err) }, "worker bundle unavailable; workers start under tsx");
    return tsxWorkerCommand();
  }
}
