/**
 * What an exec leaves to do once it has ended (its cgroup's removal and the
 * next exec's slot: an rmdir and a mkdir in each of six v1 hierarchies, a few
 * ms of kernel time each), held while other execs of the same driver are in
 * flight: in a burst of execs on many sandboxes the first to finish otherwise
 * take CPU from the rest (the density figure's 100 at once: p50 1.30-1.77x
 * the unsandboxed floor's, 0.95-1.61x held). Held at most maxHoldMs, so a long-running command elsewhere does not
 * keep a sandbox without its next slot for long.
 */
export class ExecAftermath {
  private inFlight = 0;
  private held: { cleanup: () => void; next: () => void }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly maxHoldMs: number) {}

  started(): void {
    this.inFlight++;
  }

  /**
   * An exec ended: cleanup and then next run once none is in flight (right
   * after this one's completed event when it was alone); after close() only
   * cleanup runs, at once.
   */
  ended(cleanup: () => void, next: () => void): void {
    this.inFlight--;
    this.held.push({ cleanup, next });
    if (this.inFlight === 0 || this.closed) {
      this.flush();
    } else {
      this.timer ??= setTimeout(() => this.flush(), this.maxHoldMs).unref();
    }
  }

  /** The driver stops: what is held is cleaned up now, and no next slot is made any more. */
  close(): void {
    this.closed = true;
    this.flush();
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const tasks = this.held;
    this.held = [];
    // After the completed event is out, not on its way.
    setImmediate(() => {
      for (const { cleanup, next } of tasks) {
        cleanup();
        if (!this.closed) next();
      }
    }).unref();
  }
}
