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
  done: () => void = () => {},
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
  const source = res.message;
  return {
    ...res,
    message: (async function* () {
      try {
        yield* source;
        done();
      } catch (e) {
        throw fail(e);
      }
    })(),
  };
}
