import type { Logger } from "pino";
import type { WorkerProcess } from "./worker-process.ts";

/** Backoff for spares that die before use (a broken worker command must not spin). */
const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 30_000;

/**
 * One pre-started worker with no tenant, kept per host so a cold start only
 * hands a deployment to a running process. Taking it starts the next one in
 * the background. The spare belongs to no deployment: a tenant at zero
 * replicas still has no process of its own.
 */
export class SpareWorker {
  readonly #start: () => Promise<WorkerProcess>;
  readonly #log?: Logger;
  #spare?: WorkerProcess;
  #filling?: Promise<void>;
  #retryMs = 0;
  #retry?: NodeJS.Timeout;
  #closed = false;

  constructor(start: () => Promise<WorkerProcess>, log?: Logger) {
    this.#start = start;
    this.#log = log;
  }

  /** The spare's process id (for tests and operators). */
  get pid(): number | undefined {
    return this.#spare?.pid;
  }

  /** The running spare, if there is one (possibly still loading); the next one starts at once. */
  take(): WorkerProcess | undefined {
    const spare = this.#spare;
    this.#spare = undefined;
    this.fill();
    if (!spare?.alive) return undefined;
    this.#retryMs = 0;
    return spare;
  }

  /** Starts a spare unless one runs, is starting or waits out a backoff. */
  fill(): void {
    if (this.#closed || this.#spare || this.#filling || this.#retry) return;
    this.#filling = this.#start()
      .then(
        (proc) => {
          if (this.#closed) return proc.stop();
          this.#spare = proc;
          void proc.exited.then((code) => this.#onExit(proc, code));
        },
        (err) => {
          this.#log?.warn({ err: String(err) }, "spare worker could not start");
          this.#backoff();
        },
      )
      .finally(() => {
        this.#filling = undefined;
      });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    await this.#filling;
    await this.#spare?.stop();
    this.#spare = undefined;
  }

  #onExit(proc: WorkerProcess, code: number | null): void {
    if (this.#spare !== proc) return;
    this.#spare = undefined;
    if (proc.stopping || this.#closed) return;
    this.#log?.warn({ code }, "spare worker exited before use");
    this.#backoff();
  }

  #backoff(): void {
    if (this.#closed) return;
    this.#retryMs = Math.min(this.#retryMs ? this.#retryMs * 2 : FIRST_RETRY_MS, MAX_RETRY_MS);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.fill();
    }, this.#retryMs);
    this.#retry.unref();
  }
}
