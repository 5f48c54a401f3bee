import type { ServiceImpl } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { toConnectError } from "@platform/rpc";

/**
 * Every method of an envd service with its PlatformErrors as ConnectErrors
 * of the same code (the SDK maps NOT_FOUND, UNAVAILABLE, … to its errors), also
 * for the ones a stream throws after its first message.
 */
export function withConnectErrors<S extends DescService>(
  impl: ServiceImpl<S>,
  log: (err: unknown) => void,
): ServiceImpl<S> {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(impl as Record<string, (...a: unknown[]) => unknown>)) {
    out[name] = (...args: unknown[]) => {
      let result: unknown;
      try {
        result = fn(...args);
      } catch (err) {
        throw report(err, log);
      }
      if (result && typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function")
        return guardStream(result as AsyncIterable<unknown>, log);
      if (result instanceof Promise) return result.catch((err) => Promise.reject(report(err, log)));
      return result;
    };
  }
  return out as ServiceImpl<S>;
}

async function* guardStream(it: AsyncIterable<unknown>, log: (err: unknown) => void): AsyncGenerator<unknown> {
  try {
    yield* it;
  } catch (err) {
    throw report(err, log);
  }
}

function report(err: unknown, log: (err: unknown) => void): Error {
  const ce = toConnectError(err);
  if (ce.code === 13) log(err);
  return ce;
}
