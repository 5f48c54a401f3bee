/**
 * Counting semaphore. Bounds how many argon2 hashes run at once, so memory
 * use is at most `limit` × memoryCost however many logins arrive together;
 * the rest wait in a FIFO queue.
 */
export class Semaphore {
  #free: number;
  #waiters: Array<() => void> = [];
  #peak = 0;

  constructor(readonly limit: number) {
    if (!(limit >= 1)) throw new Error("semaphore limit must be >= 1");
    this.#free = limit;
  }

  /** Highest number of holders seen at once (for tests and metrics). */
  get peak(): number {
    return this.#peak;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiters.push(resolve));
    this.#peak = Math.max(this.#peak, this.limit - this.#free);
    try {
      return await fn();
    } finally {
      const next = this.#waiters.shift();
      if (next) next();
      else this.#free++;
    }
  }
}
