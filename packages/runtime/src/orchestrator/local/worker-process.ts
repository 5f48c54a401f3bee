import { type ChildProcess, spawn } from "node:child_process";
import type { Logger } from "pino";
import { waitServing } from "../../health/grpc-health.ts";

export interface WorkerCommand {
  command: string;
  args: string[];
  cwd: string;
}

/** The default: `node --import tsx packages/runtime/src/worker/main.ts`. */
export function defaultWorkerCommand(): WorkerCommand {
  const main = new URL("../../worker/main.ts", import.meta.url).pathname;
  const pkg = new URL("../../../", import.meta.url).pathname;
  return { command: process.execPath, args: ["--import", "tsx", main], cwd: pkg };
}

/**
 * One running worker (a "pod"). Its stdin is a pipe it watches: when this
 * process dies, however abruptly, the pipe closes and the worker exits.
 */
export class WorkerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves true once gRPC health answers SERVING, false when it never does. */
  readonly ready: Promise<boolean>;
  healthy = false;
  readonly exited: Promise<number | null>;
  #stopping = false;

  constructor(
    command: WorkerCommand,
    env: Record<string, string>,
    url: string,
    startTimeoutMs: number,
    stdio: "inherit" | "ignore",
    private readonly log?: Logger,
  ) {
    this.url = url;
    this.child = spawn(command.command, command.args, {
      cwd: command.cwd,
      env: { ...env, RUNTIME_EXIT_WITH_STDIN: "1" },
      stdio: ["pipe", stdio, stdio],
    });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code) => {
        this.healthy = false;
        resolve(code);
      });
      this.child.once("error", (err) => {
        this.log?.error({ err: String(err) }, "worker spawn failed");
        resolve(null);
      });
    });
    const abort = new AbortController();
    void this.exited.then(() => abort.abort());
    this.ready = waitServing(url, startTimeoutMs, { signal: abort.signal }).then((ok) => {
      this.healthy = ok && this.child.exitCode === null;
      return this.healthy;
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get stopping(): boolean {
    return this.#stopping;
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
}
