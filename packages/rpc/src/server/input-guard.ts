import type { DescMessage, DescMethod, Message } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { oneMessage, takeNow } from "../calls/one-message.ts";
import { findStringViolation, type StringViolation } from "./string-guard.ts";

/**
 * A service's own answer to a refused string, where its contract names one
 * (identity's GetPublicKey: NOT_FOUND `kid_unknown` for any unknown kid).
 * `undefined` keeps the default INVALID_ARGUMENT, which each envelope renders
 * in its own words (`invalid_request` for identity, `invalid_argument` for
 * the others). `"handler"` lets the call through for a method whose handler
 * never stores the string and whose contract promises an answer regardless
 * (identity's logout: always 204).
 */
export type InputRefusal = (method: DescMethod, violation: StringViolation) => PlatformError | "handler" | undefined;

const problemText = { nul: "must not contain U+0000", lone_surrogate: "must be valid Unicode (a lone surrogate)" };

function refusalOf(
  method: DescMethod,
  v: StringViolation,
  refusal: InputRefusal | undefined,
): PlatformError | undefined {
  const own = refusal?.(method, v);
  if (own === "handler") return undefined;
  return own ?? PlatformError.invalidArgument(`${v.path} ${problemText[v.problem]}`);
}

function check(method: DescMethod, schema: DescMessage, message: Message, refusal: InputRefusal | undefined): void {
  const v = findStringViolation(schema, message);
  if (!v) return;
  const err = refusalOf(method, v, refusal);
  if (err) throw err;
}

/**
 * Refuses every request message holding a string no service can store
 * (U+0000, lone surrogates) before any other interceptor or handler sees it.
 * It sits right after the error interceptor on the router and the direct
 * transport, so REST, Connect, gRPC-Web and the direct gRPC path all pass
 * through it. A server-streaming call's one message is checked before its
 * handler starts; client and bidi streams are checked message by message.
 */
export function inputGuard(refusal?: InputRefusal): Interceptor {
  // Not an async function: a server stream's one in-process message (calls/one-message.ts) is checked
  // without an await. What it throws is returned as a rejection, as an async function's would be.
  return (next) => (req) => {
    try {
      return guarded(next, req, refusal);
    } catch (e) {
      return Promise.reject(e);
    }
  };
}

function guarded(
  next: Parameters<Interceptor>[0],
  req: Parameters<ReturnType<Interceptor>>[0],
  refusal: InputRefusal | undefined,
): ReturnType<ReturnType<Interceptor>> {
  const method = req.method as DescMethod;
  if (!req.stream) {
    check(method, req.method.input, req.message, refusal);
    return next(req);
  }
  const source = req.message;
  if (method.methodKind === "server_streaming") {
    const it = source[Symbol.asyncIterator]();
    const taken = takeNow(it);
    if (taken && !taken.done) {
      check(method, req.method.input, taken.value, refusal);
      // The call's own request, changed rather than copied (a copy would read its headers, which the
      // direct transport makes on first use); the handler's step takes the message as this did.
      (req as { message: AsyncIterable<Message> }).message = oneMessage(taken.value);
      return next(req);
    }
    return checkFirst(method, req, it, taken, refusal, next);
  }
  const checked = async function* () {
    for await (const m of source) {
      check(method, req.method.input, m, refusal);
      yield m;
    }
  };
  return next({ ...req, message: checked() });
}

/** A server stream's first message read with next() (any stream but oneMessage's), checked, then the call. */
async function checkFirst(
  method: DescMethod,
  req: Parameters<ReturnType<Interceptor>>[0],
  it: AsyncIterator<Message>,
  taken: IteratorResult<Message> | undefined,
  refusal: InputRefusal | undefined,
  next: Parameters<Interceptor>[0],
) {
  const first = taken ?? (await it.next());
  if (!first.done) check(method, method.input, first.value, refusal);
  (req as { message: AsyncIterable<Message> }).message = readAgain(first, it);
  return next(req);
}

/**
 * `it` with its first result, already read, given again first. Not an async
 * generator: an open stream would keep one suspended after its one message
 * for as long as it lasts, holding the message.
 */
function readAgain<T>(first: IteratorResult<T>, it: AsyncIterator<T>): AsyncIterableIterator<T> {
  let again: IteratorResult<T> | undefined = first;
  const ended = first.done === true;
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next(): Promise<IteratorResult<T>> {
      const r = again;
      again = undefined;
      if (r && !ended) return Promise.resolve(r);
      if (ended) return Promise.resolve({ done: true, value: undefined });
      return it.next();
    },
    return(value?: unknown): Promise<IteratorResult<T>> {
      again = undefined;
      return it.return ? it.return(value) : Promise.resolve({ done: true, value: undefined });
    },
  };
}
