import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import * as https from "node:https";
import { fileURLToPath } from "node:url";
import { createSecureContext, type SecureContext } from "node:tls";
import type { RestartPolicy } from "./config.ts";
import { CrashHistory } from "./crash-history.ts";
import type { ServiceLog } from "./service-log.ts";

/** One service process of the embedded shape. */
export type ServiceSpec = {
  name: string;
  /** TypeScript entry, run through tsx when there is no bundle. */
  entry: string;
  /** The entry built into plain JavaScript (launcher/bundles.ts), run by Node alone. */
  bundle?: string;
  /** Node's own options before the entry (V8 flags NODE_OPTIONS does not take). */
  nodeArgs?: string[];
  env: Record<string, string>;
  /** URL answering 200 once the service is up (its /livez); an https one is asked with the launcher's client certificate. */
  readyUrl: string;
};

/** The client certificate the launcher presents to internal ports (the operator's) and the CA it trusts. */
export type ProbeTls = { ca: Buffer; cert: Buffer; key: Buffer };

/**
 * Each ProbeTls's TLS context, made once: a service start is probed every
 * 100 ms until it answers, and a context made per probe parsed the key and
 * the CA again each time (about 1 s of the launcher's CPU per platform start
 * on a 2-core machine, most of its own).
 */
const probeContexts = new WeakMap<ProbeTls, SecureContext>();

function probeContext(tls: ProbeTls): SecureContext {
  let context = probeContexts.get(tls);
  if (!context) {
    context = createSecureContext({ ca: tls.ca, cert: tls.cert, key: tls.key });
    probeContexts.set(tls, context);
  }
  return context;
}

/** Whether `url` answers 200: plain fetch for http, mutual TLS for https. */
export function probe(url: string, tls?: ProbeTls): Promise<boolean> {
  if (!url.startsWith("https:")) {
    return fetch(url, { signal: AbortSignal.timeout(2000) })
      .then((r) => r.ok)
      .catch(() => false);
  }
  return new Promise((resolve) => {
    // The server is still verified against the context's CA (rejectUnauthorized stays on).
    const options = tls ? { secureContext: probeContext(tls) } : {};
    const req = https.get(url, { ...options, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

/** starting: spawned, not answering yet; ready: answering; restarting: crashed, waiting out its backoff; failed: given up on. */
export type ServiceState = "starting" | "ready" | "restarting" | "failed" | "stopped";

/** What the launcher knows of one service (written to platform.json for scripts and the fault suite). */
export type ServiceStatus = {
  pid: number | null;
  state: ServiceState;
  /** Restarts after crashes since the launcher started. */
  restarts: number;
  startedAt: string | null;
  readyAt: string | null;
  lastExit: { code: number | null; signal: string | null; at: string } | null;
};

export type SupervisorOptions = {
  log: (line: string) => void;
  policy: RestartPolicy;
  /** Each service's log (file and console), made once and kept across its restarts. */
  serviceLog: (name: string) => ServiceLog;
  probeTls?: ProbeTls;
  /** A service crashed maxCrashes times within the window: the caller stops everything. */
  onGiveUp: (reason: string) => void;
  /** Any status changed (a pid, a state). */
  onChange?: () => void;
  startTimeoutMs?: number;
};

type Supervised = {
  spec: ServiceSpec;
  log: ServiceLog;
  history: CrashHistory;
  status: ServiceStatus;
  child?: ChildProcess;
  exited?: Promise<unknown>;
  /** The first start: a failure there is the caller's to report, not a crash to restart. */
  initial: boolean;
  crashedAt?: number;
  restartTimer?: NodeJS.Timeout;
  healthyTimer?: NodeJS.Timeout;
  /** Killed by the launcher for not answering in time after a restart. */
  timedOut?: boolean;
};

/** Preloaded into each service: it stops when this process is gone, however that happened (its file says how). */
const EXIT_WITH_LAUNCHER = fileURLToPath(new URL("./exit-with-launcher.mjs", import.meta.url));

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;

/**
 * Starts services in order, each once the previous one answers, and keeps
 * them running: a service that exits without being asked to is started again
 * after a backoff (the restart policy), while the others go on serving; one
 * that crashes maxCrashes times within the window is given up on, and the
 * caller stops everything. Stops them in reverse order: SIGTERM, then SIGKILL
 * after the grace period.
 */
export class Supervisor {
  readonly #services: Supervised[] = [];
  #stopping = false;
  readonly #startTimeoutMs: number;

  constructor(private readonly options: SupervisorOptions) {
    this.#startTimeoutMs = options.startTimeoutMs ?? Number(process.env.PLATFORM_START_TIMEOUT_MS ?? 180_000);
  }

  /** Starts a service and waits until it answers; throws if it exits or does not answer in time (a configuration problem, not restarted). */
  async start(spec: ServiceSpec): Promise<void> {
    const s: Supervised = {
      spec,
      log: this.options.serviceLog(spec.name),
      history: new CrashHistory(this.options.policy),
      status: { pid: null, state: "starting", restarts: 0, startedAt: null, readyAt: null, lastExit: null },
      initial: true,
    };
    this.#services.push(s);
    const child = this.#spawn(s);
    const outcome = await this.#waitReady(s, child);
    if (outcome === "exited")
      throw new Error(`${spec.name} exited (${how(child)}) during start-up; its log: ${s.log.path}`);
    if (outcome === "timeout")
      throw new Error(
        `${spec.name} did not answer ${spec.readyUrl} within ${seconds(this.#startTimeoutMs)}; its log: ${s.log.path}`,
      );
    s.initial = false;
    this.#ready(s, child);
  }

  /** Every service's status by name, in start order. */
  status(): Record<string, ServiceStatus> {
    return Object.fromEntries(this.#services.map((s) => [s.spec.name, { ...s.status }]));
  }

  async stopAll(graceMs = 10_000): Promise<void> {
    this.#stopping = true;
    for (const s of this.#services) {
      clearTimeout(s.restartTimer);
      clearTimeout(s.healthyTimer);
    }
    for (const s of [...this.#services].reverse()) {
      const { child, exited } = s;
      if (child && exited && child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => {
          // Said: what it had not cleaned up yet is left behind, and its log ends without saying why.
          this.options.log(`platform: ${s.spec.name} did not stop within ${seconds(graceMs)} of SIGTERM; killing it`);
          child.kill("SIGKILL");
        }, graceMs);
        await exited;
        clearTimeout(timer);
      }
      // One given up on stays "failed": platform.json says which.
      if (s.status.state !== "failed") s.status.state = "stopped";
      s.status.pid = null;
    }
    for (const s of this.#services) s.log.close();
    this.options.onChange?.();
  }

  #spawn(s: Supervised): ChildProcess {
    const run = s.spec.bundle ? [s.spec.bundle] : ["--import", "tsx", s.spec.entry];
    const child = spawn(process.execPath, [...(s.spec.nodeArgs ?? []), "--import", EXIT_WITH_LAUNCHER, ...run], {
      env: { ...process.env, ...s.spec.env },
      // stdin: the pipe the service watches (EXIT_WITH_LAUNCHER); nothing is written to it.
      stdio: ["pipe", "pipe", "pipe"],
    });
    s.child = child;
    s.exited = once(child, "exit");
    s.timedOut = false;
    s.log.follow(child.stdout);
    s.log.follow(child.stderr);
    child.on("exit", () => this.#exited(s, child));
    Object.assign(s.status, {
      pid: child.pid ?? null,
      state: "starting",
      startedAt: new Date().toISOString(),
      readyAt: null,
    });
    this.options.onChange?.();
    return child;
  }

  async #waitReady(s: Supervised, child: ChildProcess): Promise<"ready" | "exited" | "timeout"> {
    const deadline = Date.now() + this.#startTimeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null || this.#stopping) return "exited";
      if (await probe(s.spec.readyUrl, this.options.probeTls)) return child.exitCode === null ? "ready" : "exited";
      await new Promise((r) => setTimeout(r, 100));
    }
    return "timeout";
  }

  #ready(s: Supervised, child: ChildProcess): void {
    Object.assign(s.status, { state: "ready", readyAt: new Date().toISOString() });
    // Ran long enough since this start: the next crash is a new row, not the next step of a crash loop.
    s.healthyTimer = setTimeout(() => {
      if (s.child !== child) return;
      if (s.history.streak > 0)
        this.options.log(
          `platform: ${s.spec.name} healthy for ${seconds(this.options.policy.healthyAfterMs)}: restart backoff reset`,
        );
      s.history.healthy();
    }, this.options.policy.healthyAfterMs);
    s.healthyTimer.unref();
    this.options.onChange?.();
  }

  #exited(s: Supervised, child: ChildProcess): void {
    if (s.child !== child) return;
    clearTimeout(s.healthyTimer);
    const uptimeMs = s.status.startedAt ? Date.now() - Date.parse(s.status.startedAt) : 0;
    Object.assign(s.status, {
      pid: null,
      lastExit: { code: child.exitCode, signal: child.signalCode, at: new Date().toISOString() },
    });
    if (this.#stopping || s.initial) {
      s.status.state = "stopped";
      this.options.onChange?.();
      return;
    }
    s.crashedAt = Date.now();
    const verdict = s.history.crashed(s.crashedAt);
    const { maxCrashes, windowMs } = this.options.policy;
    const cause = s.timedOut
      ? `did not answer ${s.spec.readyUrl} within ${seconds(this.#startTimeoutMs)} of its restart`
      : `exited (${how(child)}) after ${seconds(uptimeMs)}`;
    const count = `crash ${verdict.inWindow} of ${maxCrashes} allowed within ${seconds(windowMs)}`;
    if (verdict.giveUp) {
      s.status.state = "failed";
      this.options.onChange?.();
      this.options.onGiveUp(`${s.spec.name} ${cause}; ${count}: giving up (its log: ${s.log.path})`);
      return;
    }
    s.status.state = "restarting";
    this.options.log(
      `platform: ${s.spec.name} ${cause}; ${count}; restarting it in ${seconds(verdict.delayMs)} (restart ${s.status.restarts + 1})`,
    );
    s.restartTimer = setTimeout(() => void this.#restart(s), verdict.delayMs);
    this.options.onChange?.();
  }

  async #restart(s: Supervised): Promise<void> {
    if (this.#stopping) return;
    s.status.restarts += 1;
    const child = this.#spawn(s);
    const outcome = await this.#waitReady(s, child);
    if (this.#stopping || s.child !== child) return;
    if (outcome === "ready") {
      this.#ready(s, child);
      const since = s.crashedAt ? `, answering ${seconds(Date.now() - s.crashedAt)} after the crash` : "";
      this.options.log(`platform: ${s.spec.name} is back (pid ${child.pid}, restart ${s.status.restarts}${since})`);
    } else if (outcome === "timeout") {
      // Counted as a crash by the exit handler, with the reason.
      s.timedOut = true;
      child.kill("SIGKILL");
    }
  }
}

function how(child: ChildProcess): string {
  return child.signalCode ? `signal ${child.signalCode}` : `code ${child.exitCode}`;
}
