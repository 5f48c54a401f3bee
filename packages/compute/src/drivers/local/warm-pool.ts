import type { Logger } from "pino";

/** Directory and cgroup name prefix of sandboxes started ahead, before any CreateSandbox. */
export const WARM_PREFIX = ".warm-";
/**
 * Adoption runs first; the next warm sandbox is started once the adopted
 * sandbox's first exec ended (the driver calls refill), or after this delay.
 */
const WARM_REFILL_DELAY_MS = 100;

/** How the driver makes and ends the sandboxes the pool holds. */
export interface WarmFactory<W> {
  /** A new sandbox object (nothing made on the host yet). */
  newWarm(): W;
  /** Makes its workspace image and cgroup and starts it (unless the driver closed meanwhile). */
  provision(sandbox: W): Promise<void>;
  /** Ends it and removes everything of it: processes, cgroup, workspace, directory. */
  teardown(sandbox: W): Promise<void>;
}

/**
 * Sandboxes started ahead (the driver's warmSandboxes), so a CreateSandbox
 * with the default size and mount path adopts one instead of waiting for
 * bwrap to build a new one. The pool knows how many, which are ready, and
 * that each is ended once; the driver how they are made and adopted.
 */
export class WarmPool<W extends { observation: { phase: string } }> {
  /** In the pool, adoptable once READY. */
  readonly sandboxes: W[] = [];
  private readonly made = new Map<W, Promise<void>>();
  private readonly discarding = new Map<W, Promise<void>>();
  private closed = false;

  constructor(
    private readonly target: number,
    private readonly factory: WarmFactory<W>,
    private readonly log?: Logger,
  ) {}

  /** A ready one, out of the pool (its place refilled shortly), or none. */
  take(): W | undefined {
    const i = this.sandboxes.findIndex((w) => w.observation.phase === "ready");
    if (i < 0) return undefined;
    const taken = this.sandboxes.splice(i, 1)[0];
    this.made.delete(taken as W);
    setTimeout(() => this.refill(), WARM_REFILL_DELAY_MS).unref();
    return taken;
  }

  /** Whether the sandbox is still one of the pool's (false once taken, discarded or the pool closed). */
  holds(sandbox: W): boolean {
    return this.sandboxes.includes(sandbox);
  }

  /** Starts sandboxes up to the target. */
  refill(): void {
    while (!this.closed && this.sandboxes.length < this.target) {
      const sandbox = this.factory.newWarm();
      // In the pool at once (so the loop stops), adoptable once READY.
      this.sandboxes.push(sandbox);
      this.made.set(sandbox, this.provision(sandbox));
    }
  }

  /** Ends one that will not be used (it exited, or its adoption failed): once, after it was made. */
  discard(sandbox: W): Promise<void> {
    const i = this.sandboxes.indexOf(sandbox);
    if (i >= 0) this.sandboxes.splice(i, 1);
    let done = this.discarding.get(sandbox);
    if (!done) {
      done = (async () => {
        await this.made.get(sandbox);
        this.made.delete(sandbox);
        await this.factory.teardown(sandbox);
      })();
      this.discarding.set(sandbox, done);
    }
    return done;
  }

  /** Ends them all; none is started again. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.sandboxes].map((w) => this.discard(w)));
  }

  private async provision(sandbox: W): Promise<void> {
    try {
      await this.factory.provision(sandbox);
    } catch (err) {
      // Never thrown: nobody awaits a refill, and an unhandled rejection would end the service.
      this.log?.warn({ err }, "preparing a warm sandbox failed");
      const i = this.sandboxes.indexOf(sandbox);
      if (i >= 0) this.sandboxes.splice(i, 1);
      await this.factory.teardown(sandbox).catch(() => {});
    }
  }
}
