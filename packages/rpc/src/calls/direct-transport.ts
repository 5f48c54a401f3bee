import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  type Message,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import {
  getAbortSignalReason,
  invokeUnaryImplementation,
  transformInvokeImplementation,
} from "@connectrpc/connect/protocol";
import type { ServiceRegistration } from "./registration.ts";

export interface DirectTransportOptions {
  services: ServiceRegistration[];
  /** The server's interceptors, outermost first, exactly as the router applies them. */
  interceptors: Interceptor[];
  /** Context values of a call (the server puts its RequestInfo there). */
  contextValues: () => ContextValues;
}

interface CallContext extends HandlerContext {
  /** Ends the call: its signal aborts with `reason`, its timer and link to the caller's signal go. */
  abort(reason: unknown): void;
}

// Ending a call aborts its context so the handler's timers and listeners go;
// one shared reason spares an AbortError (with its stack) per call.
export const callEnded = new ConnectError("call ended", Code.Canceled);

/**
 * A Transport that calls the service implementations in this process with
 * the router's interceptors, passing messages as objects. The REST and SSE
 * routes and plain gRPC calls (grpc-direct.ts) use it; handlers see
 * protocolName "rest" either way. Going through the Connect protocol in memory instead cost
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
    if (!spec)
      throw new ConnectError(`${method.parent.typeName}.${method.name} is not served here`, Code.Unimplemented);
    const context = callContext(method, signal, timeoutMs, header, contextValues ?? o.contextValues());
    return [spec, context];
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const [spec, context] = contextOf(method, signal, timeoutMs, header, contextValues);
      try {
        const message = await untilAborted(
          context.signal,
          invokeUnaryImplementation(
            spec as MethodImplSpec & { kind: "unary" },
            context,
            input as Message,
            o.interceptors,
          ),
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
      const request: StreamRequest = {
        stream: true,
        service: method.parent,
        method: method as DescMethodStreaming,
        requestMethod: context.requestMethod,
        url: context.url,
        signal: context.signal,
        header: context.requestHeader,
        contextValues: context.values,
        message: input as AsyncIterable<never>,
      } as unknown as StreamRequest;
      const call = spec.kind === "server_streaming" ? serverStreaming(spec, context) : otherStreaming(spec, context);
      return {
        stream: true,
        service: method.parent,
        method: method as DescMethodStreaming,
        header: context.responseHeader,
        trailer: context.responseTrailer,
        message: new CallOutput(() => call(request), context, method.output),
      } as unknown as StreamResponse<never, never>;
    },
  };

  /**
   * The interceptors around a server-streaming implementation, with no
   * generator of our own in between: each suspended layer of an idle SSE
   * stream costs memory (connect's own invoke path adds three).
   */
  function serverStreaming(spec: MethodImplSpec & { kind: "server_streaming" }, context: CallContext) {
    // The innermost step inline, not a named closure: the chain lives as long
    // as the stream, and under tsx (keepNames) a named closure also carries a
    // dictionary of properties.
    const chain = o.interceptors.reduceRight<(req: StreamRequest) => Promise<StreamResponse>>(
      (next, interceptor) => interceptor(next as never) as never,
      async (req: StreamRequest): Promise<StreamResponse> => {
        const first = await req.message[Symbol.asyncIterator]().next();
        if (first.done) throw new ConnectError("missing input message for server-streaming method", Code.Unimplemented);
        const output = spec.impl(first.value as never, {
          ...context,
          requestHeader: req.header,
          signal: req.signal,
          values: req.contextValues,
        });
        return {
          stream: true,
          service: req.service,
          method: req.method,
          header: context.responseHeader,
          trailer: context.responseTrailer,
          message: output,
        } as unknown as StreamResponse;
      },
    );
    return async (req: StreamRequest) => {
      const res = await chain(req);
      copyInto(res.header, context.responseHeader);
      return res.message[Symbol.asyncIterator]() as AsyncIterator<Message>;
    };
  }

  /** Client and bidi streams (no REST route has one) through connect's own path. */
  function otherStreaming(spec: MethodImplSpec, context: CallContext) {
    return async (req: StreamRequest) =>
      transformInvokeImplementation(
        spec,
        context,
        o.interceptors,
      )(req.message as AsyncIterable<never>)[Symbol.asyncIterator]() as AsyncIterator<Message>;
  }
}

function copyInto(from: Headers, to: Headers): void {
  if (from === to) return;
  from.forEach((v, k) => {
    to.set(k, v);
  });
}

/**
 * The handler's context: one AbortController following the caller's signal
 * and the deadline. (Connect's createHandlerContext links three signals per
 * call; with thousands of idle SSE streams each one counts.)
 */
function callContext(
  method: DescMethod,
  callerSignal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: ConstructorParameters<typeof Headers>[0],
  values: ContextValues,
): CallContext {
  const controller = new AbortController();
  const follow = callerSignal && new FollowAbort(controller, callerSignal);
  if (callerSignal?.aborted) follow!.handleEvent();
  else callerSignal?.addEventListener("abort", follow!, { once: true });
  const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(
          () => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)),
          timeoutMs,
        );
  return {
    service: method.parent,
    method,
    protocolName: "rest",
    requestMethod: "POST",
    url: `/${method.parent.typeName}/${method.name}`,
    signal: controller.signal,
    timeoutMs() {
      return deadline === undefined ? undefined : deadline - Date.now();
    },
    requestHeader: new Headers(header),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values,
    abort(reason) {
      clearTimeout(timer);
      if (follow) callerSignal?.removeEventListener("abort", follow);
      controller.abort(reason);
    },
  };
}

/**
 * Aborts the call's controller when its caller's signal aborts. An object
 * with handleEvent rather than a closure: one per open call, and under tsx
 * (keepNames) a named closure also carries a dictionary of properties.
 */
class FollowAbort {
  constructor(
    private readonly controller: AbortController,
    private readonly caller: AbortSignal,
  ) {}

  handleEvent(): void {
    this.controller.abort(getAbortSignalReason(this.caller));
  }
}

/**
 * A stream's output: ends the call's context when the stream ends, fails or
 * is given up, and fails a pending read when the call is aborted (deadline,
 * client gone, shutdown) even if the handler does not watch its signal.
 */
class CallOutput implements AsyncIterableIterator<Message> {
  #source: Promise<AsyncIterator<Message>> | undefined;
  /** The started call's stream, once it is there. */
  #it: AsyncIterator<Message> | undefined;
  /** Starts the call; let go once it has (it holds the call's request: headers and message). */
  #start: (() => Promise<AsyncIterator<Message>>) | undefined;
  /** The abort listener (one per call) rejects the pending read, if any, through this. */
  #rejectRead: ((reason: unknown) => void) | undefined;
  #listening = false;
  constructor(
    start: () => Promise<AsyncIterator<Message>>,
    private readonly context: CallContext,
    private readonly output: DescMessage,
  ) {
    this.#start = start;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  // Not an async function: an idle stream's pending read would keep its frame suspended.
  next(): Promise<IteratorResult<Message>> {
    if (this.context.signal.reason === callEnded) return Promise.resolve({ done: true, value: undefined });
    if (this.#it) return this.#read(this.#it);
    let source: Promise<AsyncIterator<Message>>;
    try {
      source = this.#source ??= this.#begin();
    } catch (e) {
      return Promise.reject(this.#failed(e));
    }
    return this.#untilAborted(source).then(
      (it) => {
        this.#it = it;
        return this.#read(it);
      },
      (e: unknown) => {
        throw this.#failed(e);
      },
    );
  }

  #read(it: AsyncIterator<Message>): Promise<IteratorResult<Message>> {
    let pending: Promise<IteratorResult<Message>>;
    try {
      pending = it.next();
    } catch (e) {
      return Promise.reject(this.#failed(e));
    }
    return this.#untilAborted(pending).then(
      (r): IteratorResult<Message> => {
        if (r.done) {
          this.context.abort(callEnded);
          return r;
        }
        try {
          // Implementations may yield plain objects.
          return { done: false, value: create(this.output, r.value as never) as Message };
        } catch (e) {
          throw this.#failed(e);
        }
      },
      (e: unknown) => {
        throw this.#failed(e);
      },
    );
  }

  #begin(): Promise<AsyncIterator<Message>> {
    const start = this.#start!;
    this.#start = undefined;
    return start();
  }

  /** The error a failed read throws; the call is over. */
  #failed(e: unknown): ConnectError {
    const err = withResponseHeaders(e, this.context);
    this.context.abort(callEnded);
    return err;
  }

  /**
   * `work`, or the call's abort reason once it is aborted. Not a
   * Promise.race against one long-lived aborted promise: each race leaves a
   * reaction on that promise holding its result (every message of the
   * stream) until the call ends, so a replay of 20,000 events held them all.
   */
  #untilAborted<T>(work: Promise<T>): Promise<T> {
    const { signal } = this.context;
    if (!this.#listening) {
      this.#listening = true;
      signal.addEventListener("abort", this, { once: true });
    }
    if (signal.aborted) {
      work.catch(() => {});
      return Promise.reject(getAbortSignalReason(signal));
    }
    return new Promise<T>((resolve, reject) => {
      this.#rejectRead = reject;
      work.then(
        (value) => {
          if (this.#rejectRead === reject) this.#rejectRead = undefined;
          resolve(value);
        },
        (err: unknown) => {
          if (this.#rejectRead === reject) this.#rejectRead = undefined;
          reject(err);
        },
      );
    });
  }

  /** The call's abort: the pending read, if any, fails with its reason. (The listener is this object: no closure per call.) */
  handleEvent(): void {
    this.#rejectRead?.(getAbortSignalReason(this.context.signal));
  }

  async return(): Promise<IteratorResult<Message>> {
    this.context.abort(callEnded);
    if (!this.#source) return { done: true, value: undefined };
    // A call still starting (an interceptor waiting) is not waited for: it
    // sees its signal aborted, and its stream is closed when it arrives.
    const started = this.#source;
    const source = await Promise.race([started, abortedPromise(this.context.signal)]).catch(() => undefined);
    if (!source) {
      started.then((s) => s.return?.()).catch(() => {});
      return { done: true, value: undefined };
    }
    await source.return?.();
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
  for (const sent of [context.responseHeader, context.responseTrailer]) {
    sent.forEach((v, k) => {
      if (!err.metadata.has(k)) err.metadata.set(k, v);
    });
  }
  return err;
}
