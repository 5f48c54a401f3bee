/**
 * The request stream of a server-streaming call made in-process: its one
 * message, then the end. Unlike an async generator over `[message]`, it
 * keeps no suspended frame and lets the message go once it is read, so an
 * open stream (an SSE follower) does not hold its request for its whole life.
 */
export function oneMessage<T>(message: T): AsyncIterableIterator<T> {
  return new OneMessage(message);
}

/**
 * The next result of `source` taken now, without a promise, when it is
 * oneMessage's (undefined for any other stream: read it with next()). The
 * interceptors and the innermost step of a server stream take the one
 * request message this way: two awaits, each a turn of the microtask queue
 * (and, under async_hooks, a promise with its hooks), fewer on every
 * stream's way to its handler (packages/bench/ANALYSIS.md, grpc-js).
 */
export function takeNow<T>(source: AsyncIterator<T> | AsyncIterable<T>): IteratorResult<T> | undefined {
  return source instanceof OneMessage ? (source as OneMessage<T>).take() : undefined;
}

class OneMessage<T> implements AsyncIterableIterator<T> {
  #left: { value: T } | undefined;

  constructor(message: T) {
    this.#left = { value: message };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    return Promise.resolve(this.take());
  }

  /** What next() resolves with, now. */
  take(): IteratorResult<T> {
    const taken = this.#left;
    this.#left = undefined;
    return taken ? { done: false, value: taken.value } : { done: true, value: undefined };
  }

  return(): Promise<IteratorResult<T>> {
    this.#left = undefined;
    return Promise.resolve({ done: true, value: undefined });
  }
}
