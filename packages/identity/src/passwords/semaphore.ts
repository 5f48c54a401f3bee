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

  /**
   * Runs `fn` holding a slot. With `signal`, a caller still waiting when it
   * aborts (its client gone, its deadline passed) leaves the queue and gets
   * the signal's reason: work nobody waits for any more is not done.
   */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    if (this.#free > 0) this.#free--;
    else if (this.#waiters.length >= this.maxQueue) throw new QueueFullError("semaphore queue full");
    else await this.#wait(signal);
    this.#peak = Math.max(this.#peak, this.limit - this.#free);
    try {
      return await fn();
    } finally {
      const next = this.#waiters.shift();
      if (next) next();
      else this.#free++;
    }
  }

  #wait(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const at = this.#waiters.indexOf(granted);
        if (at >= 0) this.#waiters.splice(at, 1);
        reject(signal!.reason);
      };
      // Handed the slot of a finishing holder.
      const granted = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      this.#waiters.push(granted);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
