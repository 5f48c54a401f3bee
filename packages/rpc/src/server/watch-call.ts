import type { StreamResponse, UnaryResponse } from "@connectrpc/connect";

/**
 * A server interceptor's view of the call below it: `call()` answered, its
 * outcome reported as soon as it is known. `fail(e)` runs when the call or its
 * response stream fails, and what it returns is thrown in place of `e`;
 * `done()` when a unary call answered, or a stream ended after its last
 * message. A reader that stops a stream early (return) reports neither.
 */
export async function watchCall(
  call: () => Promise<UnaryResponse | StreamResponse>,
  fail: (e: unknown) => unknown,
  done: () => void = nothing,
): Promise<UnaryResponse | StreamResponse> {
  let res: UnaryResponse | StreamResponse;
  try {
    res = await call();
  } catch (e) {
    throw fail(e);
  }
  if (!res.stream) {
    done();
    return res;
  }
  return { ...res, message: new WatchedStream(res.message, fail, done) };
}

function nothing(): void {}

/**
 * The stream's messages passed through as they are read. An iterator object
 * rather than an async generator around the source: a generator stays
 * suspended, with its frame and a pending request, for as long as an idle
 * stream (an SSE follower) is open.
 */
class WatchedStream<T> implements AsyncIterableIterator<T> {
  #it: AsyncIterator<T> | undefined;
  #finished = false;

  constructor(
    private readonly source: AsyncIterable<T>,
    private readonly fail: (e: unknown) => unknown,
    private readonly done: () => void,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  #source(): AsyncIterator<T> {
    this.#it ??= this.source[Symbol.asyncIterator]();
    return this.#it;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#finished) return Promise.resolve({ done: true, value: undefined });
    let pending: Promise<IteratorResult<T>>;
    try {
      pending = this.#source().next();
    } catch (e) {
      return this.#failed(e);
    }
    return pending.then(
      (r) => {
        if (r.done && !this.#finished) {
          this.#finished = true;
          this.done();
        }
        return r;
      },
      (e: unknown) => this.#failed(e),
    );
  }

  async return(value?: unknown): Promise<IteratorResult<T>> {
    if (this.#finished || !this.#it) {
      this.#finished = true;
      return { done: true, value: value as undefined };
    }
    this.#finished = true;
    try {
      await this.#it.return?.(value);
    } catch (e) {
      throw this.fail(e);
    }
    return { done: true, value: value as undefined };
  }

  #failed(e: unknown): Promise<never> {
    this.#finished = true;
    return Promise.reject(this.fail(e));
  }
}
