/** The requests being served, so a shutdown can wait until none is left. */
export class Inflight {
  #count = 0;
  #waiters: (() => void)[] = [];

  get count(): number {
    return this.#count;
  }

  begin(): void {
    this.#count++;
  }

  end(): void {
    this.#count--;
    if (this.#count === 0) {
      for (const w of this.#waiters) w();
      this.#waiters = [];
    }
  }

  /** Resolves when no request is in flight (at once if none is). */
  idle(): Promise<void> {
    return this.#count === 0 ? Promise.resolve() : new Promise((r) => this.#waiters.push(r));
  }
}
