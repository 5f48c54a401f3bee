/** The wait queue is at its bound: the caller is refused at once instead of queued. */
export class QueueFullError extends Error {
  override name = "QueueFullError";
}

/**
 * Counting semaphore. Bounds how many argon2 hashes run at once, so memory
 * use is at most `limit` × memoryCost however many logins arrive together;
 * the rest wait in a FIFO queue of at most `maxQueue`, beyond which `run`
 * throws QueueFullError without waiting (a flood gets fast refusals, not
 * an ever-growing queue whose every entry would time out anyway).
 */
export class Semaphore {
  #free: number;
  #waiters: Array<() => void> = [];
  #peak = 0;

  constructor(
    readonly limit: number,
    readonly maxQueue = Number.POSITIVE_INFINITY,
  ) {
    if (!(limit >= 1)) throw new Error("semaphore limit must be >= 1");
    this.#free = limit;
  }

  /** Highest number of holders seen at once (for tests and metrics). */
  get peak(): number {
    return this.#peak;
  }

  /** Every slot is taken and the queue is at its bound: `run` would throw. */
  get full(): boolean {
    return this.#free === 0 && this.#waiters.length >= this.maxQueue;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else if (this.#waiters.length >= this.maxQueue) throw new QueueFullError("semaphore queue full");
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
