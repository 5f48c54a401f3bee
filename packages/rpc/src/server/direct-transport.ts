import type { DescMethod, DescMethodStreaming, DescMethodUnary, Message } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createHandlerContext,
  createServiceImplSpec,
  type Interceptor,
  type MethodImplSpec,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import {
  getAbortSignalReason,
  invokeUnaryImplementation,
  transformInvokeImplementation,
} from "@connectrpc/connect/protocol";
import type { ServiceRegistration } from "./create-server.ts";

export interface DirectTransportOptions {
  services: ServiceRegistration[];
  /** The server's interceptors, outermost first, exactly as the router applies them. */
  interceptors: Interceptor[];
  /** Context values of a call (the server puts its RequestInfo there). */
  contextValues: () => ContextValues;
}

type CallContext = ReturnType<typeof createHandlerContext>;

// Ending a call aborts its context so the handler's timers and listeners go;
// one shared reason spares an AbortError (with its stack) per call.
const callEnded = new ConnectError("call ended", Code.Canceled);

/**
 * A Transport that calls the service implementations in this process with
 * the router's interceptors, passing messages as objects. The REST and SSE
 * routes use it: going through the Connect protocol in memory instead cost
 * a binary encode and decode of every message, envelopes and some twenty
 * async generators per call, and ~70 KiB of heap per open SSE stream
 * (packages/bench/ANALYSIS.md). What a handler sees is the same: a
 * HandlerContext with the call's headers, deadline, signal and values.
 */
export function createDirectTransport(o: DirectTransportOptions): Transport {
  const specs = new Map<DescMethod, MethodImplSpec>();
  for (const { service, impl } of o.services) {
    const spec = createServiceImplSpec(service, impl as never);
    for (const method of service.methods) specs.set(method, spec.methods[method.localName] as MethodImplSpec);
  }
  const contextOf = (
    method: DescMethod,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0],
    contextValues: ContextValues | undefined,
  ): [MethodImplSpec, CallContext] => {
    const spec = specs.get(method);
    if (!spec) throw new ConnectError(`${method.parent.typeName}.${method.name} is not served here`, Code.Unimplemented);
    const context = createHandlerContext({
      service: method.parent,
      method,
      protocolName: "rest",
      requestMethod: "POST",
      url: `/${method.parent.typeName}/${method.name}`,
      timeoutMs,
      requestSignal: signal,
      requestHeader: header,
      contextValues: contextValues ?? o.contextValues(),
    });
    return [spec, context];
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const [spec, context] = contextOf(method, signal, timeoutMs, header, contextValues);
      try {
        const message = await untilAborted(
          context.signal,
          invokeUnaryImplementation(spec as MethodImplSpec & { kind: "unary" }, context, input as Message, o.interceptors),
        );
        return {
          stream: false,
          service: method.parent,
          method: method as DescMethodUnary,
          header: context.responseHeader,
          trailer: context.responseTrailer,
          message,
        } as unknown as UnaryResponse<never, never>;
      } catch (e) {
        throw withResponseHeaders(e, context);
      } finally {
        context.abort(callEnded);
      }
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const [spec, context] = contextOf(method, signal, timeoutMs, header, contextValues);
      const output = transformInvokeImplementation(spec, context, o.interceptors)(input as AsyncIterable<never>);
      return {
        stream: true,
        service: method.parent,
        method: method as DescMethodStreaming,
        header: context.responseHeader,
        trailer: context.responseTrailer,
        message: new CallOutput(output[Symbol.asyncIterator](), context),
      } as unknown as StreamResponse<never, never>;
    },
  };
}

/**
 * A stream's output: ends the call's context when the stream ends, fails or
 * is given up, and fails a pending read when the call is aborted (deadline,
 * client gone, shutdown) even if the handler does not watch its signal.
 */
class CallOutput implements AsyncIterableIterator<Message> {
  #aborted: Promise<never> | undefined;
  constructor(
    private readonly source: AsyncIterator<Message>,
    private readonly context: CallContext,
  ) {}

  [Symbol.asyncIterator]() {
    return this;
  }

  async next(): Promise<IteratorResult<Message>> {
    if (this.context.signal.reason === callEnded) return { done: true, value: undefined };
    this.#aborted ??= abortedPromise(this.context.signal);
    try {
      const r = await Promise.race([this.source.next(), this.#aborted]);
      if (r.done) this.context.abort(callEnded);
      return r;
    } catch (e) {
      const err = withResponseHeaders(e, this.context);
      this.context.abort(callEnded);
      throw err;
    }
  }

  async return(): Promise<IteratorResult<Message>> {
    this.context.abort(callEnded);
    await this.source.return?.();
    return { done: true, value: undefined };
  }
}

function abortedPromise(signal: AbortSignal): Promise<never> {
  const p = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(getAbortSignalReason(signal));
    else signal.addEventListener("abort", () => reject(getAbortSignalReason(signal)), { once: true });
  });
  // Nobody may be reading when the call ends.
  p.catch(() => {});
  return p;
}

function untilAborted<T>(signal: AbortSignal, work: Promise<T>): Promise<T> {
  return Promise.race([work, abortedPromise(signal)]);
}

/**
 * Over the wire, headers a handler set before failing travel with the error
 * and a client sees them as the error's metadata (e.g. Retry-After).
 */
function withResponseHeaders(e: unknown, context: CallContext): ConnectError {
  const err = ConnectError.from(e);
  context.responseHeader.forEach((v, k) => {
    if (!err.metadata.has(k)) err.metadata.set(k, v);
  });
  context.responseTrailer.forEach((v, k) => {
    if (!err.metadata.has(k)) err.metadata.set(k, v);
  });
  return err;
}
