import type { DescMessage, DescMethodServerStreaming, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";

export interface StreamCallOptions {
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** The response headers, once they came: the server accepted the call. */
  onHeader?: (header: Headers) => void;
}

/**
 * A server-streaming call, as a Connect client's method makes it (started
 * at once; the response headers to onHeader; the messages; no return(), so
 * the call ends through its signal or its last message), without the client's
 * async generator around the transport's stream: with a direct transport
 * (createServiceTransport's `direct`), a message costs one promise from the
 * HTTP/2 stream to the reader.
 */
export function streamCall<I extends DescMessage, O extends DescMessage>(
  transport: Transport,
  method: DescMethodServerStreaming<I, O>,
  input: MessageInitShape<I>,
  options: StreamCallOptions = {},
): AsyncIterable<MessageShape<O>> {
  const opened = transport
    .stream(method, options.signal, undefined, options.headers, createAsyncIterable([input]), undefined)
    .then((res) => {
      options.onHeader?.(res.header);
      return res.message[Symbol.asyncIterator]();
    });
  // A failed opening is the first next()'s; until then it is not an unhandled rejection.
  opened.catch(() => {});
  let it: AsyncIterator<MessageShape<O>> | undefined;
  const iterator = {
    next(): Promise<IteratorResult<MessageShape<O>>> {
      if (it) return it.next();
      return opened.then((opening) => {
        it = opening;
        return opening.next();
      });
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
