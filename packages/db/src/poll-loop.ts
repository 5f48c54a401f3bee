/**
 * Runs `pass` now and then again `intervalMs()` after each pass ends, until stop(): passes never overlap, a
 * failed pass goes to `onError` and the next one retries, and the timer keeps no process alive. For workers
 * that poll a table (identity's webhook deliveries, agents' webhook relay).
 */
export class PollLoop {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #stopped = true;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly intervalMs: () => number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts polling with a pass now; a second start while running does nothing. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops polling and waits for the pass under way, if any. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /** A pass now instead of at the next poll, unless one is running or the loop is stopped. */
  wake(): void {
    if (!this.#stopped && !this.#running) this.#schedule(0);
  }

  #schedule(ms: number) {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#running = this.pass()
        .catch((err) => this.onError(err))
        .finally(() => {
          this.#running = undefined;
          if (!this.#stopped) this.#schedule(this.intervalMs());
        });
    }, ms);
    this.#timer.unref();
  }
}
