import { join } from "node:path";
import type { ServiceTls } from "@platform/rpc";
import type { Logger } from "pino";
import { type Deployment, type DeploymentSpec, type Orchestrator, OrchestratorError } from "../orchestrator.ts";
import { freePort } from "./free-port.ts";
import { SpareWorker } from "./spare-worker.ts";
import { loadState, type StoredDeployment, saveState } from "./state-file.ts";
import { defaultWorkerCommand } from "./worker-command.ts";
import { type WorkerCommand, WorkerProcess } from "./worker-process.ts";

export interface LocalOrchestratorOptions {
  /** Directory of the state file (`orchestrator.json`). */
  dataDir: string;
  /** Environment every worker gets besides the deployment's own (AGENTS_GRPC_URL, LOG_LEVEL, ...). */
  workerEnv?: Record<string, string>;
  /** Interface the workers bind to and the endpoint names. */
  host?: string;
  /** How long a starting worker may take to answer gRPC health before it counts as failed (default 120 s). */
  startTimeoutMs?: number;
  /**
   * How long create and scale-up block waiting for the worker to answer
   * (default 10 s, the spec's cold-start wait); past it they return and the
   * worker keeps starting in the background.
   */
  scaleWaitMs?: number;
  /**
   * How workers start (default: the worker bundle, built on first use; tsx
   * when it cannot be built). A spare needs a command that runs
   * worker/main.ts, which speaks the adoption protocol (worker/supervisor.ts).
   */
  workerCommand?: WorkerCommand;
  /**
   * Keep one pre-started worker with no tenant, which the next deployment to
   * scale up adopts: a cold start then skips process start. Default: on with
   * the default command.
   */
  spareWorker?: boolean;
  /** Worker stdout/stderr: shared with this process, or dropped. */
  workerStdio?: "inherit" | "ignore";
  /**
   * Mutual TLS: every worker (the spare too) gets `workerFiles` as its
   * TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE and serves https, and this
   * process checks their health with `client` (the router's certificate,
   * the only one a worker admits). Without it the endpoints are http and
   * the workers need INTERNAL_TLS=off in `workerEnv`.
   */
  tls?: { client: ServiceTls; workerFiles: { caFile: string; certFile: string; keyFile: string } };
  logger?: Logger;
}

const PASS_ENV = ["PATH", "HOME", "TMPDIR", "LANG", "TZ", "NODE_OPTIONS"];

/**
 * The embedded orchestrator: a tenant "Deployment" is one worker process on a
 * local port (replicas above 1 still run one process). Desired replicas,
 * labels and annotations live in a JSON state file under `dataDir`, so a
 * restarted router finds them again and restarts the workers that should
 * run. A worker that dies is restarted, as a Deployment would. One router
 * process owns a data directory.
 */
export class LocalOrchestrator implements Orchestrator {
  readonly #opts: Required<Omit<LocalOrchestratorOptions, "logger" | "workerEnv" | "workerCommand" | "tls">> & {
    workerEnv: Record<string, string>;
    tls?: LocalOrchestratorOptions["tls"];
  };
  readonly #log?: Logger;
  readonly #path: string;
  #items = new Map<string, StoredDeployment>();
  readonly #procs = new Map<string, WorkerProcess>();
  readonly #restartDelay = new Map<string, number>();
  /** Workers being stopped; a new one for the name waits for the old to free the port. */
  readonly #stopping = new Map<string, Promise<void>>();
  /** Serialises every state change (and its write) in this process. */
  #lock: Promise<unknown> = Promise.resolve();
  #closed = false;
  /** Resolves the worker command; the default checks the bundle against its sources each time. */
  readonly #command: () => Promise<WorkerCommand>;
  #checking?: Promise<WorkerCommand>;
  readonly #spare?: SpareWorker;

  private constructor(options: LocalOrchestratorOptions) {
    const files = options.tls?.workerFiles;
    // The certificate settings last: they are the orchestrator's to give, and
    // a worker told INTERNAL_TLS=off would serve plaintext to a router calling https.
    const workerEnv: Record<string, string> = {
      ...options.workerEnv,
      ...(files && { TLS_CA_FILE: files.caFile, TLS_CERT_FILE: files.certFile, TLS_KEY_FILE: files.keyFile }),
    };
    if (files) delete workerEnv.INTERNAL_TLS;
    this.#opts = {
      dataDir: options.dataDir,
      workerEnv,
      tls: options.tls,
      host: options.host ?? "127.0.0.1",
      startTimeoutMs: options.startTimeoutMs ?? 120_000,
      scaleWaitMs: options.scaleWaitMs ?? 10_000,
      spareWorker: options.spareWorker ?? options.workerCommand === undefined,
      workerStdio: options.workerStdio ?? "inherit",
    };
    this.#log = options.logger;
    this.#path = join(options.dataDir, "orchestrator.json");
    const fixed = options.workerCommand;
    const check = fixed ? () => Promise.resolve(fixed) : () => defaultWorkerCommand(this.#log);
    // Callers at the same time share one check (and at most one build).
    this.#command = () => {
      this.#checking ??= check().finally(() => {
        this.#checking = undefined;
      });
      return this.#checking;
    };
    this.#spare = this.#opts.spareWorker ? new SpareWorker(() => this.#startSpare(), this.#log) : undefined;
  }

  /** Loads the state and starts (in the background) the workers that should run. */
  static async open(options: LocalOrchestratorOptions): Promise<LocalOrchestrator> {
    const o = new LocalOrchestrator(options);
    o.#items = await loadState(o.#path);
    o.#spare?.fill();
    for (const name of o.#items.keys()) void o.#reconcile(name);
    return o;
  }

  #locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#lock.then(fn, fn);
    this.#lock = run.catch(() => {});
    return run;
  }

  #view(d: StoredDeployment): Deployment {
    const p = this.#procs.get(d.spec.name);
    return {
      name: d.spec.name,
      replicas: d.replicas,
      readyReplicas: d.replicas > 0 && p?.healthy ? 1 : 0,
      labels: { ...d.spec.labels },
      annotations: { ...d.annotations },
    };
  }

  #must(name: string): StoredDeployment {
    const d = this.#items.get(name);
    if (!d) throw new OrchestratorError("not_found", `deployment ${name} not found`);
    return d;
  }

  async getDeployment(name: string): Promise<Deployment | undefined> {
    const d = this.#items.get(name);
    return d && this.#view(d);
  }

  async createDeployment(spec: DeploymentSpec): Promise<Deployment> {
    await this.#locked(async () => {
      if (this.#items.has(spec.name)) throw new OrchestratorError("already_exists", `deployment ${spec.name} exists`);
      const port = await this.#allocatePort();
      this.#items.set(spec.name, {
        spec: structuredClone(spec),
        replicas: spec.replicas,
        annotations: { ...spec.annotations },
        port,
      });
      await this.#save();
    });
    await this.#reconcile(spec.name);
    return this.#view(this.#must(spec.name));
  }

  async scaleDeployment(name: string, replicas: number): Promise<void> {
    if (!Number.isInteger(replicas) || replicas < 0) throw new RangeError(`replicas must be a non-negative integer`);
    await this.#locked(async () => {
      this.#must(name).replicas = replicas;
      await this.#save();
    });
    await this.#reconcile(name);
  }

  async patchAnnotations(name: string, patch: Record<string, string | null>): Promise<void> {
    await this.#locked(async () => {
      const d = this.#must(name);
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete d.annotations[k];
        else d.annotations[k] = v;
      }
      await this.#save();
    });
  }

  async listDeployments(selector: Record<string, string>): Promise<Deployment[]> {
    return [...this.#items.values()]
      .filter((d) => Object.entries(selector).every(([k, v]) => d.spec.labels[k] === v))
      .map((d) => this.#view(d));
  }

  async deleteDeployment(name: string): Promise<void> {
    await this.#locked(async () => {
      if (!this.#items.delete(name)) return;
      await this.#save();
    });
    await this.#reconcile(name);
  }

  async endpoint(name: string): Promise<string | undefined> {
    const d = this.#items.get(name);
    return d && this.#url(d.port);
  }

  /** The worker's process id, when one runs (for tests and operators). */
  pidOf(name: string): number | undefined {
    return this.#procs.get(name)?.pid;
  }

  /** The spare worker's process id, when one runs (for tests and operators). */
  sparePid(): number | undefined {
    return this.#spare?.pid;
  }

  /** Stops every worker; the state file keeps what should run for the next start. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#lock;
    await Promise.all([...this.#procs.values()].map((p) => p.stop()).concat(this.#spare?.close() ?? []));
    this.#procs.clear();
  }

  #url(port: number): string {
    return `${this.#opts.tls ? "https" : "http"}://${this.#opts.host}:${port}`;
  }

  async #save(): Promise<void> {
    try {
      await saveState(this.#path, this.#items);
    } catch (err) {
      throw new OrchestratorError("transient", `cannot write ${this.#path}`, { cause: err });
    }
  }

  async #allocatePort(): Promise<number> {
    const taken = new Set([...this.#items.values()].map((d) => d.port));
    for (;;) {
      const p = await freePort(this.#opts.host);
      if (!taken.has(p)) return p;
    }
  }

  /**
   * Makes the processes match the desired state: starts a worker when
   * replicas > 0 and none runs (waiting for its health), stops it at 0 or
   * when the deployment is gone.
   */
  async #reconcile(name: string, command?: WorkerCommand): Promise<void> {
    const d = this.#items.get(name);
    const running = this.#procs.get(name);
    const want = !this.#closed && d !== undefined && d.replicas > 0;
    if (!want) {
      if (running) {
        this.#procs.delete(name);
        const stopped = running.stop().finally(() => {
          if (this.#stopping.get(name) === stopped) this.#stopping.delete(name);
        });
        this.#stopping.set(name, stopped);
        await stopped;
      }
      return;
    }
    if (running && !running.stopping) {
      await this.#bounded(running.ready);
      return;
    }
    const previous = this.#stopping.get(name);
    if (previous) {
      await previous;
      return this.#reconcile(name);
    }
    const proc = this.#spare?.take() ?? (command ? this.#spawn(command, this.#deploymentEnv(d)) : undefined);
    // No spare: the command first (meanwhile a spare may come up), then the checks again.
    if (!proc) return this.#reconcile(name, await this.#command());
    this.#log?.info({ deployName: name, port: d.port, pid: proc.pid, spare: proc.spare }, "starting worker");
    proc.serve(this.#url(d.port), this.#opts.startTimeoutMs, proc.spare ? this.#deploymentEnv(d) : undefined);
    this.#procs.set(name, proc);
    void proc.exited.then((code) => this.#onExit(name, proc, code));
    void proc.ready.then((ok) => {
      if (ok) this.#restartDelay.delete(name);
      else if (!proc.stopping) this.#log?.warn({ deployName: name, url: proc.url }, "worker not serving in time");
    });
    await this.#bounded(proc.ready);
  }

  /** Waits for a worker's readiness, at most scaleWaitMs. */
  async #bounded(ready: Promise<boolean>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([ready, new Promise((r) => (timer = setTimeout(r, this.#opts.scaleWaitMs)))]);
    clearTimeout(timer);
  }

  /** What distinguishes one deployment's worker from another's. */
  #deploymentEnv(d: StoredDeployment): Record<string, string> {
    return { ...d.spec.env, PORT: String(d.port), HOST: this.#opts.host };
  }

  /** A worker process; without `deploymentEnv`, a spare that waits for one. */
  #spawn(command: WorkerCommand, deploymentEnv?: Record<string, string>): WorkerProcess {
    const env: Record<string, string> = {};
    for (const k of PASS_ENV) if (process.env[k]) env[k] = process.env[k] as string;
    // HOST for a spare too: its warm-up listens for a moment before any deployment is handed to it.
    Object.assign(env, { HOST: this.#opts.host }, this.#opts.workerEnv, deploymentEnv);
    return new WorkerProcess(command, env, {
      stdio: this.#opts.workerStdio,
      spare: !deploymentEnv,
      log: this.#log,
      tls: this.#opts.tls?.client,
    });
  }

  /** A new spare, from a command checked just now (its code is current as of its start). */
  async #startSpare(): Promise<WorkerProcess> {
    return this.#spawn(await this.#command());
  }

  /** A worker that exits while it should run is restarted with backoff; a new port if it never served. */
  async #onExit(name: string, proc: WorkerProcess, code: number | null): Promise<void> {
    if (this.#procs.get(name) !== proc) return;
    this.#procs.delete(name);
    if (proc.stopping || this.#closed) return;
    const wasHealthy = await proc.ready;
    const delay = Math.min(this.#restartDelay.get(name) ?? 500, 10_000);
    this.#restartDelay.set(name, delay * 2);
    this.#log?.warn({ deployName: name, code, delayMs: delay }, "worker exited; restarting");
    setTimeout(() => {
      void (async () => {
        if (!wasHealthy) {
          // Perhaps its port was taken by another program: move.
          await this.#locked(async () => {
            const d = this.#items.get(name);
            if (!d) return;
            d.port = await this.#allocatePort();
            await this.#save();
          }).catch(() => {});
        }
        await this.#reconcile(name);
      })();
    }, delay).unref();
  }
}
