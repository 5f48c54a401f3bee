/** An unbounded single-consumer queue: a process's events between its exec stream and one Connect stream. */
export class Queue<T> {
  #items: T[] = [];
  #wake?: () => void;

  push(item: T): void {
    this.#items.push(item);
    this.#wake?.();
  }

  async *drain(signal: AbortSignal): AsyncGenerator<T> {
    while (!signal.aborted) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
      this.#wake = undefined;
    }
  }
}
