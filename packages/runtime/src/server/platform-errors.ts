import { ConnectError, type Interceptor, type Code as ConnectCode } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";

/**
 * Server interceptor: a PlatformError thrown by a handler (also mid-stream)
 * leaves as the ConnectError of its code and message; anything else as a
 * bare internal error. Stands in until @platform/rpc's createServer does
 * this for every service.
 */
export const platformErrors: Interceptor = (next) => async (req) => {
  try {
    const res = await next(req);
    if (!res.stream) return res;
    return { ...res, message: mapStream(res.message) };
  } catch (err) {
    throw toConnect(err);
  }
};

async function* mapStream<T>(it: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* it;
  } catch (err) {
    throw toConnect(err);
  }
}

function toConnect(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const p = PlatformError.from(err);
  return new ConnectError(p.message, p.code as number as ConnectCode, undefined, undefined, err);
}
