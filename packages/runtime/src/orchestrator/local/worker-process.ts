import { type ChildProcess, spawn } from "node:child_process";
import type { ServiceTls } from "@platform/rpc";
import type { Logger } from "pino";
import { waitServing } from "../../health/grpc-health.ts";
import { type AdoptMessage, isReady, isWaiting, SPARE_ENV } from "../../worker/supervisor.ts";

interface Refable {
  ref?(): void;
  unref?(): void;
}

export interface WorkerCommand {
  command: string;
  args: string[];
  cwd: string;
}

/**
 * One worker process (a "pod"). Its stdin is a pipe it watches: when this
 * process dies, however abruptly, the pipe closes and the worker exits. A
 * spare is started without a deployment and serves once `serve` hands it
 * one; an idle spare does not keep this process alive.
 */
export class WorkerProcess {
  readonly child: ChildProcess;
  readonly spare: boolean;
  readonly exited: Promise<number | null>;
  /** The worker said its port is bound (false when it exited first). */
  readonly #reported: Promise<boolean>;
  /** A spare is listening for its adoption. */
  readonly #waiting: Promise<boolean>;
  #ready?: Promise<boolean>;
  #url?: string;
  healthy = false;
  #stopping = false;
  /** The certificate health checks of an https worker are made with. */
  readonly #tls?: ServiceTls;

  constructor(
    command: WorkerCommand,
    env: Record<string, string>,
    options: { stdio: "inherit" | "ignore"; spare?: boolean; log?: Logger; tls?: ServiceTls },
  ) {
    this.spare = options.spare ?? false;
    this.#tls = options.tls;
    this.child = spawn(command.command, command.args, {
      cwd: command.cwd,
      env: { ...env, RUNTIME_EXIT_WITH_STDIN: "1", ...(this.spare ? { [SPARE_ENV]: "1" } : {}) },
      stdio: ["pipe", options.stdio, options.stdio, "ipc"],
    });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code) => {
        this.healthy = false;
        resolve(code);
      });
      this.child.once("error", (err) => {
        options.log?.error({ err: String(err) }, "worker spawn failed");
        resolve(null);
      });
    });
    const message = (test: (m: unknown) => boolean) =>
      new Promise<boolean>((resolve) => {
        const on = (m: unknown) => {
          if (!test(m)) return;
          this.child.off("message", on);
          resolve(true);
        };
        this.child.on("message", on);
        void this.exited.then(() => resolve(false));
      });
    this.#reported = message(isReady);
    this.#waiting = this.spare ? message(isWaiting) : Promise.resolve(true);
    if (this.spare) this.#hold(false);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get url(): string | undefined {
    return this.#url;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && !this.#stopping;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** Resolves true once the worker serves at its URL, false when it never does (or has not been given one). */
  get ready(): Promise<boolean> {
    return this.#ready ?? Promise.resolve(false);
  }

  /**
   * Puts the worker to work at `url`: a spare gets the deployment's
   * environment (`env`); either way `ready` settles on the worker's own
   * report that its port is bound, or gRPC health SERVING (a command that
   * does not report), or false after `startTimeoutMs` or an exit.
   */
  serve(url: string, startTimeoutMs: number, env?: Record<string, string>): void {
    if (this.#ready) throw new Error("worker already serves");
    this.#url = url;
    if (this.spare) {
      this.#hold(true);
      const adopt: AdoptMessage = { type: "adopt", env: env ?? {} };
      void this.#waiting.then((waiting) => {
        if (waiting && this.child.connected) this.child.send(adopt);
      });
    }
    const polling = new AbortController();
    void this.exited.then(() => polling.abort());
    const polled = waitServing(url, startTimeoutMs, { signal: polling.signal, tls: this.#tls });
    this.#ready = Promise.race([this.#reported.then((ok) => ok || polled), polled]).then((ok) => {
      polling.abort();
      this.healthy = ok && this.child.exitCode === null;
      return this.healthy;
    });
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  async stop(graceMs = 5000): Promise<void> {
    this.#stopping = true;
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Whether the process, its stdin pipe and its IPC channel keep this process's event loop alive. */
  #hold(on: boolean): void {
    // The stdin pipe is a net.Socket at run time; its type says only Writable.
    const handles = [this.child, this.child.stdin as unknown as Refable | null, this.child.channel];
    for (const h of handles) {
      if (on) h?.ref?.();
      else h?.unref?.();
    }
  }
}
