/**
 * The request stream of a server-streaming call made in-process: its one
 * message, then the end. Unlike an async generator over `[message]`, it
 * keeps no suspended frame and lets the message go once it is read, so an
 * open stream (an SSE follower) does not hold its request for its whole life.
 */
export function oneMessage<T>(message: T): AsyncIterableIterator<T> {
  return new OneMessage(message);
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
    const taken = this.#left;
    this.#left = undefined;
    return Promise.resolve(taken ? { done: false, value: taken.value } : { done: true, value: undefined });
  }

  return(): Promise<IteratorResult<T>> {
    this.#left = undefined;
    return Promise.resolve({ done: true, value: undefined });
  }
}
