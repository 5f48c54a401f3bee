import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serviceTlsFiles } from "@platform/pki";
import { type ProbeTls, probe } from "../launcher/supervisor.ts";
import { seedEmbeddedDatabases } from "../testing/embedded-databases.ts";
import { freePort } from "../testing/free-port.ts";
import { ProcessGroup } from "../testing/process-group.ts";
import { processTree } from "../testing/process-tree.ts";

const root = new URL("../../../../", import.meta.url).pathname;

/** The launcher's services, by the entry each runs. */
export const SERVICE_ENTRIES = {
  identity: "packages/identity/src/main.ts",
  compute: "packages/compute/src/main.ts",
  agents: "packages/agents/src/main.ts",
  runtime: "packages/runtime/src/router/main.ts",
} as const;
export type ServiceName = keyof typeof SERVICE_ENTRIES;

export type FaultPlatformOptions = {
  /** PostgreSQL for every service (the cluster shape); absent: each service's embedded PGlite. */
  databaseUrl?: string;
  /** Settings for the launcher and, through it, every service. */
  env?: Record<string, string>;
  /** Called with the new data directory before the first launch (e.g. to put ready databases in it). */
  prepare?: (dataDir: string) => void | Promise<void>;
  /**
   * On PGlite, leave the data directory empty, so that each service's first
   * start makes its cluster (initdb) as a newcomer's does. Otherwise each gets
   * a copied new cluster (seedEmbeddedDatabases), which saves that CPU.
   */
  firstStart?: boolean;
};

/**
 * The real platform as `bash scripts/run.sh` runs it: the launcher
 * (packages/platform/src/main.ts) in a process group of its own, supervising
 * the four services, on free loopback ports and a throw-away data directory.
 * Faults are injected from outside: signals to service pids, the database
 * stopped under it, clients that go away.
 */
export class FaultPlatform {
  readonly dataDir: string;
  readonly db: "postgres" | "pglite";
  endpoints!: Record<"identity" | "agents" | "router" | "identityGrpc" | "computeGrpc" | "agentsGrpc", string>;
  ownerEmail = "owner@example.com";
  ownerPassword = "";
  #ports: Record<string, string> = {};
  #launcher?: ChildProcess;
  #group?: ProcessGroup;
  #exited?: Promise<number | null>;
  #log: string[] = [];
  #tls?: ProbeTls;

  private constructor(private readonly options: FaultPlatformOptions) {
    this.dataDir = mkdtempSync(join(tmpdir(), "platform-faults-"));
    // The sandbox's mapped user must traverse it (mkdtemp makes 0700).
    chmodSync(this.dataDir, 0o755);
    this.db = options.databaseUrl ? "postgres" : "pglite";
  }

  static async start(options: FaultPlatformOptions = {}): Promise<FaultPlatform> {
    const platform = new FaultPlatform(options);
    const names = [
      "PLATFORM_IDENTITY_PORT",
      "PLATFORM_IDENTITY_GRPC_PORT",
      "PLATFORM_COMPUTE_PORT",
      "PLATFORM_AGENTS_PORT",
      "PLATFORM_AGENTS_GRPC_PORT",
      "PLATFORM_ROUTER_PORT",
    ];
    const taken = new Set<number>();
    for (const name of names) {
      let p = await freePort("127.0.0.1");
      while (taken.has(p)) p = await freePort("127.0.0.1");
      taken.add(p);
      platform.#ports[name] = String(p);
    }
    process.once("exit", platform.#reap);
    if (!options.databaseUrl && !options.firstStart) await seedEmbeddedDatabases(platform.dataDir);
    await options.prepare?.(platform.dataDir);
    await platform.launch();
    return platform;
  }

  /** The launcher's pid (undefined when it is not running). */
  get launcherPid(): number | undefined {
    return this.#launcher && this.#launcher.exitCode === null && this.#launcher.signalCode === null
      ? this.#launcher.pid
      : undefined;
  }

  /** Starts the launcher (again, on the same data directory and ports) and waits until it says the platform is up. */
  async launch(timeoutMs = 420_000): Promise<number> {
    const started = Date.now();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      // Services log info and up to the data directory's logs/ (the console stays at warnings): failure reports quote them.
      PLATFORM_DATA_DIR: this.dataDir,
      PLATFORM_HOST: "127.0.0.1",
      ...this.#ports,
      ...(this.options.databaseUrl ? { DATABASE_URL: this.options.databaseUrl } : {}),
      ...this.options.env,
    };
    // What scripts/run.sh runs: the launcher and its services from their bundles.
    const child = spawn(process.execPath, [join(root, "packages/platform/bin/start.mjs")], {
      cwd: root,
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#launcher = child;
    this.#group = child.pid ? new ProcessGroup(child.pid) : undefined;
    this.#exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    let out = "";
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n"))
        if (line.trim()) this.#log.push(`${new Date().toISOString().slice(11, 23)} ${line}`);
      if (this.#log.length > 2000) this.#log.splice(0, this.#log.length - 2000);
    };
    child.stdout?.on("data", (c: Buffer) => {
      out += c.toString();
      keep(c);
    });
    child.stderr?.on("data", keep);
    const deadline = Date.now() + timeoutMs;
    while (!out.includes("Ctrl-C stops everything.")) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(
          `launcher exited (${child.exitCode ?? child.signalCode}) before the platform was up\n${this.logs()}`,
        );
      if (Date.now() > deadline) throw new Error(`platform not up within ${timeoutMs / 1000} s\n${this.logs()}`);
      await sleep(200);
    }
    const file = JSON.parse(readFileSync(join(this.dataDir, "platform.json"), "utf8")) as {
      endpoints: FaultPlatform["endpoints"];
    };
    this.endpoints = file.endpoints;
    this.ownerPassword = (
      JSON.parse(readFileSync(join(this.dataDir, "secrets.json"), "utf8")) as { ownerPassword: string }
    ).ownerPassword;
    const operator = serviceTlsFiles(join(this.dataDir, "tls"), "operator");
    this.#tls = {
      ca: readFileSync(operator.caFile),
      cert: readFileSync(operator.certFile),
      key: readFileSync(operator.keyFile),
    };
    return Date.now() - started;
  }

  /** What the launcher printed (its own lines and its services' stderr), with arrival times. */
  logs(last = 300): string {
    return this.#log.slice(-last).join("\n");
  }

  /** Lines of the launcher's output since `mark` (a previous logLength()). */
  logSince(mark: number): string[] {
    return this.#log.slice(mark);
  }

  logLength(): number {
    return this.#log.length;
  }

  /** The pid of a service the launcher runs now, found among the launcher's children by the service's entry. */
  servicePid(name: ServiceName): number | undefined {
    const launcher = this.launcherPid;
    if (!launcher) return undefined;
    for (const pid of childrenOf(launcher)) {
      const cmd = cmdline(pid);
      if (cmd.includes(SERVICE_ENTRIES[name]) && cmd.includes("--import")) return pid;
      // Run from its bundle (launcher/bundles.ts): <cache>/platform-bundles/<build>/<name>.mjs.
      if (new RegExp(`/platform-bundles/[0-9a-f]+/${name}\\.mjs( |$)`).test(cmd)) return pid;
    }
    return undefined;
  }

  /** Every process of the platform now: the launcher and its descendants (sandboxes included). */
  processes(): number[] {
    const launcher = this.launcherPid;
    return launcher ? processTree(launcher) : [];
  }

  /** The URL the launcher itself probes for a service's readiness (https ones with the operator's certificate). */
  readyUrl(name: ServiceName): string {
    const e = this.endpoints;
    return name === "identity"
      ? `${e.identityGrpc}/livez`
      : name === "compute"
        ? `${e.computeGrpc}/livez`
        : name === "agents"
          ? `${e.agentsGrpc}/livez`
          : `${e.router}/livez`;
  }

  /** Whether a service answers its readiness probe within `timeoutMs`. */
  answers(name: ServiceName, timeoutMs = 2000): Promise<boolean> {
    return Promise.race([probe(this.readyUrl(name), this.#tls), bound(timeoutMs).then(() => false)]);
  }

  /**
   * A readiness probe told apart: "ok"; "failed" (refused, or another
   * answer than 200, within a second); "slow" (no answer within a second or
   * two: a loaded machine, or a stalled service).
   */
  async probe(name: ServiceName): Promise<"ok" | "failed" | "slow"> {
    const started = Date.now();
    const ok = await this.answers(name, 5000);
    return ok ? "ok" : Date.now() - started < 1000 ? "failed" : "slow";
  }

  /** kill -9 of one service; returns its pid. */
  kill9(name: ServiceName): number {
    const pid = this.servicePid(name);
    if (!pid) throw new Error(`${name} is not running\n${this.logs(50)}`);
    process.kill(pid, "SIGKILL");
    return pid;
  }

  /**
   * Waits until the launcher runs `name` again under a pid other than `old`
   * and it answers; the time from now. Throws after `timeoutMs`.
   */
  async waitRestarted(name: ServiceName, old: number, timeoutMs: number): Promise<number> {
    const started = Date.now();
    while (Date.now() - started < timeoutMs) {
      const pid = this.servicePid(name);
      if (pid && pid !== old && (await this.answers(name))) return Date.now() - started;
      if (!this.launcherPid) throw new Error(`the launcher exited after ${name} was killed\n${this.logs(80)}`);
      await sleep(100);
    }
    throw new Error(`${name} not restarted and answering within ${timeoutMs / 1000} s\n${this.logs(80)}`);
  }

  /** Ctrl-C: SIGINT to the launcher's process group, as a terminal sends it; the exit code (or "timeout"). */
  async stop(timeoutMs = 60_000): Promise<number | null | "timeout"> {
    const child = this.#launcher;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    this.#group?.signal("SIGINT");
    return Promise.race([this.#exited!, bound(timeoutMs).then(() => "timeout" as const)]);
  }

  /** Stops everything that is left and removes the data directory. */
  async destroy(): Promise<void> {
    if ((await this.stop()) === "timeout") this.#reap();
    process.off("exit", this.#reap);
    this.#reap();
    try {
      rmSync(this.dataDir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      // A workspace still mounted (the leak checks say so where it matters) is the next compute's to sweep.
      progress(`data directory not removed: ${(err as Error).message}`);
    }
  }

  /** Whatever outlived a runner that gave up on the file: the launcher's group, killed. */
  #reap = () => {
    this.#group?.signal("SIGKILL");
  };
}

/**
 * A process's children, from /proc/<pid>/task/<tid>/children (a child
 * belongs to the thread that started it). The launcher starts its services
 * itself; waitRestarted asks for them 10 times a second, and reading every
 * process of the machine for its parent each time (processTree) was most of
 * a fault file's own CPU.
 */
function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    try {
      for (const child of readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" "))
        if (child) out.push(Number(child));
    } catch {}
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The losing side of a race (a bound on a wait): its timer does not hold
 * the process, so a file whose tests are done exits instead of waiting it out.
 */
export const bound = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/** Polls `check` until it returns a value other than undefined/false; the value and the time it took. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
  everyMs = 200,
): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return { value: value as T, ms: Date.now() - started };
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await sleep(everyMs);
  }
}

/** The p-th percentile (0-100) of `values` (nearest rank). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** A progress line on stderr when FAULTS_VERBOSE is set (the runner shows only the end of a file). */
export function progress(line: string): void {
  if (process.env.FAULTS_VERBOSE) process.stderr.write(`[faults ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
}
