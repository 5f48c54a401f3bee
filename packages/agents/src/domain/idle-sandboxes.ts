import type { Logger } from "pino";
import type { Sandboxes } from "./ports.ts";

/** A session that keeps a sandbox although nothing ran in it for the idle period. */
export type IdleSandbox = { sessionId: string; sandboxId: string };

/** Persistence the sweep needs; the session rows are its whole state. */
export interface IdleSandboxStore {
  /**
   * Up to `limit` sessions with a sandbox, no run holding them, and no
   * change (message, event, run) for `idleMs`, longest idle first.
   */
  idleSandboxes(idleMs: number, limit: number): Promise<IdleSandbox[]>;
  /**
   * Clears the session's sandbox if it is still `sandboxId` and the session
   * is still idle that long (a run that started meanwhile keeps it).
   */
  forgetSandbox(sessionId: string, sandboxId: string, idleMs: number): Promise<boolean>;
}

export type IdleSandboxOptions = {
  /** How long a session may sit idle before its sandbox is destroyed. */
  idleMs: number;
  /** How often to look; default a quarter of idleMs, between 1 s and 60 s. */
  intervalMs?: number;
  /** Sandboxes destroyed per round at most (the rest wait for the next round). */
  batch?: number;
};

/**
 * Destroys the sandboxes of sessions that have been idle for `idleMs`, so a
 * finished conversation does not keep its sandbox (processes, cgroups, a
 * workspace on disk) forever. DestroySandbox starts compute's grace window
 * for the workspace; a later message to the session gets a new sandbox on
 * its first tool call, as a session that never had one does.
 *
 * The database is the whole state: a session is idle when no run holds it
 * and its row has not changed for the period, so the sweep picks up after a
 * restart exactly where it was, and several replicas may sweep at once
 * (DestroySandbox of a destroyed sandbox is not an error). The sandbox is
 * destroyed first and forgotten after: a crash or an unreachable compute in
 * between leaves the session pointing at it, and a later round destroys it
 * again rather than leaking it.
 */
export class IdleSandboxSweeper {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;
  readonly #intervalMs: number;

  constructor(
    private readonly store: IdleSandboxStore,
    private readonly sandboxes: Sandboxes,
    private readonly options: IdleSandboxOptions,
    private readonly logger: Logger,
  ) {
    this.#intervalMs = options.intervalMs ?? Math.min(60_000, Math.max(1000, Math.floor(options.idleMs / 4)));
  }

  /** Sweeps now (sessions that went idle while the service was down) and then every interval. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.sweep(), this.#intervalMs);
    this.#timer.unref();
    void this.sweep();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running?.catch(() => {});
  }

  /** One round; resolves with the number of sandboxes destroyed. Rounds never overlap. */
  sweep(): Promise<number> {
    this.#running ??= this.#round().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #round(): Promise<number> {
    let idle: IdleSandbox[];
    try {
      idle = await this.store.idleSandboxes(this.options.idleMs, this.options.batch ?? 50);
    } catch (err) {
      this.logger.warn({ err }, "could not look for idle sessions' sandboxes; trying again next round");
      return 0;
    }
    let destroyed = 0;
    for (const { sessionId, sandboxId } of idle) {
      try {
        await this.sandboxes.destroy(sandboxId);
        destroyed++;
        // False when a run took the session meanwhile: its first tool call finds the sandbox gone and makes a new one.
        const forgotten = await this.store.forgetSandbox(sessionId, sandboxId, this.options.idleMs);
        this.logger.info({ sessionId, sandboxId, forgotten }, "destroyed the sandbox of an idle session");
      } catch (err) {
        // Compute or the database is down: the session still names the sandbox, so a later round retries.
        this.logger.warn(
          { err, sessionId, sandboxId },
          "could not destroy an idle session's sandbox; trying again next round",
        );
      }
    }
    return destroyed;
  }
}
