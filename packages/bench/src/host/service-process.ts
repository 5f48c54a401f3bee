import { type ChildProcess, fork } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
// The launcher's bundler and service flags, reached by path as the footprint figure reaches the
// launcher's harness: the bench depends on the platform's sources, never the other way round.
import { BUNDLE_CACHE, ensureBundles } from "../../../platform/src/launcher/bundles.ts";
import { SERVICE_NODE_ARGS } from "../../../platform/src/launcher/services.ts";
import { IpcCalls } from "./ipc-calls.ts";

const CHILD = fileURLToPath(new URL("./child.ts", import.meta.url));

/**
 * Beside the launcher's cache, not in it: ensureBundles removes from its
 * directory the builds it did not just make once they are an hour old, so
 * the two would delete each other's (a running platform's or bench's lazily
 * loaded chunks included).
 */
const CHILD_BUNDLE_CACHE = join(dirname(BUNDLE_CACHE), "platform-bench-bundles");

export type ServiceKind =
  | "identity"
  | "compute"
  | "agents"
  | "bare-sse"
  | "bare-grpc"
  | "bare-exec"
  | "bare-login"
  | "bare-token-source"
  | "bare-token-relay";

/**
 * Each kind's Node flags: the services' own (`bash scripts/run.sh` runs them
 * with these); a peer those of the service it is compared with, so a ratio
 * compares servers, not V8 settings.
 */
const NODE_ARGS: Record<ServiceKind, readonly string[]> = {
  identity: SERVICE_NODE_ARGS.identity,
  compute: SERVICE_NODE_ARGS.compute,
  agents: SERVICE_NODE_ARGS.agents,
  "bare-sse": SERVICE_NODE_ARGS.agents,
  "bare-grpc": SERVICE_NODE_ARGS.identity,
  "bare-exec": SERVICE_NODE_ARGS.compute,
  "bare-login": SERVICE_NODE_ARGS.identity,
  "bare-token-source": SERVICE_NODE_ARGS.agents,
  "bare-token-relay": SERVICE_NODE_ARGS.runtime,
};

let childBundle: Promise<string> | undefined;

/**
 * child.ts and the services it starts as one bundle, built as the launcher
 * builds each service's (launcher/bundles.ts: the same esbuild options,
 * workspace sources in, node_modules outside, dynamic imports as chunks
 * loaded when they run) and cached until a source changes.
 */
function childBundlePath(): Promise<string> {
  childBundle ??= ensureBundles({ "bench-child": CHILD }, CHILD_BUNDLE_CACHE).then(
    ({ paths }) => paths["bench-child"]!,
  );
  return childBundle;
}

/**
 * How a service process runs: from the bundle on plain Node with the
 * launcher's flags, as users run the services; with BENCH_CHILD_TSX=1 as
 * the bench ran them before, the sources through tsx with Node's defaults
 * (--cpu-prof profiles then name source files; tsx adds a loader thread and
 * its transpiled sources to each process). BENCH_CHILD_EXEC_ARGV comes last, so
 * its flags win (e.g. "--cpu-prof --cpu-prof-dir=DIR", or a V8 setting).
 */
async function childCommand(kind: ServiceKind): Promise<{ module: string; execArgv: string[] }> {
  const extra = process.env.BENCH_CHILD_EXEC_ARGV?.split(" ").filter(Boolean) ?? [];
  if (process.env.BENCH_CHILD_TSX === "1")
    return { module: CHILD, execArgv: ["--import", "tsx", "--expose-gc", ...extra] };
  return { module: await childBundlePath(), execArgv: [...NODE_ARGS[kind], "--expose-gc", ...extra] };
}

export interface ChildStats {
  rss: number;
  heapUsed: number;
  /** V8's committed heap: what RSS holds of it beside the live objects (heapUsed) is its free space. */
  heapTotal: number;
  external: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** GC pauses since the last resetLag (PerformanceObserver "gc" entries). */
  gc: { count: number; totalMs: number; maxMs: number };
  cpu: { user: number; system: number };
}

/** A service under test running in its own Node process (see child.ts). */
export class ServiceProcess {
  readonly #calls: IpcCalls;

  private constructor(
    readonly kind: string,
    readonly child: ChildProcess,
    readonly urls: Record<string, string>,
  ) {
    this.#calls = new IpcCalls(child, kind);
  }

  get pid(): number {
    return this.child.pid!;
  }

  static async start(kind: ServiceKind, env: Record<string, string>, timeoutMs = 60_000): Promise<ServiceProcess> {
    const { module, execArgv } = await childCommand(kind);
    const child = fork(module, [kind], {
      execArgv,
      env: { ...process.env, LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    const urls = await new Promise<Record<string, string>>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`${kind} did not start within ${timeoutMs} ms`));
      }, timeoutMs);
      child.on("message", function onMsg(raw) {
        const msg = raw as { type?: string; urls?: Record<string, string>; error?: string };
        if (msg.type === "ready") {
          clearTimeout(timer);
          child.off("message", onMsg);
          resolve(msg.urls!);
        } else if (msg.type === "failed") {
          clearTimeout(timer);
          reject(new Error(`${kind} failed to start: ${msg.error}`));
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`${kind} exited with ${code} before it was ready`));
      });
    });
    return new ServiceProcess(kind, child, urls);
  }

  /** `args` travel with the request (the child's handler of `type` reads them). */
  request<T>(type: string, timeoutMs = 30_000, args: Record<string, unknown> = {}): Promise<T> {
    return this.#calls.request<T>(type, timeoutMs, args);
  }

  /** Stops the event-loop delay sampling a resetLag started (the runner, after each figure). */
  async lagOff(): Promise<void> {
    await this.request("lagOff").catch(() => {});
  }

  stats(): Promise<ChildStats> {
    return this.request<ChildStats>("stats");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    await this.request("close", 20_000).catch(() => {});
    // It exits by itself after closing (so profiles get written); signals only if it does not.
    const term = setTimeout(() => this.child.kill("SIGTERM"), 5000);
    const kill = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(term);
    clearTimeout(kill);
  }
}
