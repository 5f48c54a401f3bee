import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  type DescService,
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
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { getAbortSignalReason, transformInvokeImplementation } from "@connectrpc/connect/protocol";
import { adoptController, CallController } from "../http/adopt.ts";
import { takeNow } from "./one-message.ts";
import type { LazyHeaders } from "../http/node-io.ts";
import { type Parkable, parkableOf, type Waiter } from "./parkable.ts";
import type { ServiceRegistration } from "./registration.ts";

/** What a Headers object is made from. */
type HeadersInit = ConstructorParameters<typeof Headers>[0];

export interface DirectTransportOptions {
  services: ServiceRegistration[];
  /**
   * The server's interceptors, outermost first, exactly as the router
   * applies them. Applied once, not per call: an interceptor keeps no state
   * of a call outside the function it returns.
   */
  interceptors: Interceptor[];
  /** Context values of a call (the server puts its RequestInfo there). */
  contextValues: () => ContextValues;
}

// Ending a call aborts its context so the handler's timers and listeners go;
// one shared reason spares an AbortError (with its stack) per call.
export const callEnded = new ConnectError("call ended", Code.Canceled);

/** Where requests, responses and handler contexts of the transport keep their call. */
const kCall = Symbol("direct call");

type Tagged = { [kCall]?: DirectCall };

interface MethodEntry {
  spec: MethodImplSpec;
  /** The `url` a handler sees. */
  url: string;
}

/**
 * A Transport that calls the service implementations in this process with
 * the router's interceptors, passing messages as objects. The REST and SSE
 * routes and plain gRPC calls (grpc-direct.ts) use it; handlers see
 * protocolName "rest" either way. Going through the Connect protocol in memory instead cost
 * a binary encode and decode of every message, envelopes and some twenty
 * async generators per call, and ~70 KiB of heap per open SSE stream
 * (packages/bench/ANALYSIS.md). What a handler sees is the same: a
 * HandlerContext with the call's headers, deadline, signal and values; its
 * headers are made when first read. The interceptors are applied once to
 * one innermost step per kind of call, which finds its call on the request
 * (Connect applies them for every call: a closure per interceptor a call).
 */
export function createDirectTransport(o: DirectTransportOptions): DirectTransport {
  const methods = new Map<DescMethod, MethodEntry>();
  for (const { service, impl } of o.services) {
    const spec = createServiceImplSpec(service, impl as never);
    for (const method of service.methods) {
      methods.set(method, {
        spec: spec.methods[method.localName] as MethodImplSpec,
        url: `/${service.typeName}/${method.name}`,
      });
    }
  }
  const entryOf = (method: DescMethod): MethodEntry => {
    const entry = methods.get(method);
    if (!entry)
      throw new ConnectError(`${method.parent.typeName}.${method.name} is not served here`, Code.Unimplemented);
    return entry;
  };

  const unaryChain = o.interceptors.reduceRight<(req: UnaryRequest) => Promise<UnaryResponse>>(
    (next, interceptor) => interceptor(next as never) as never,
    invokeUnary,
  );
  const streamChain = o.interceptors.reduceRight<(req: StreamRequest) => Promise<StreamResponse>>(
    (next, interceptor) => interceptor(next as never) as never,
    invokeServerStreaming,
  );

  async function unary(
    method: DescMethodUnary,
    caller: AbortSignal | CallController | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | LazyHeaders | undefined,
    input: unknown,
    contextValues: ContextValues | undefined,
  ): Promise<UnaryResponse> {
    const entry = entryOf(method);
    const call = new DirectCall(method, entry, caller, timeoutMs, header, contextValues ?? o.contextValues());
    try {
      return call.unaryAnswer(await call.untilAborted(unaryChain(call.request(false, input))));
    } catch (e) {
      throw call.withResponseHeaders(e);
    } finally {
      call.abort(callEnded);
    }
  }

  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      return unary(method as never, signal, timeoutMs, header, input, contextValues) as never;
    },
    unaryWith: unary,
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const entry = entryOf(method);
      const call = new DirectCall(method, entry, signal, timeoutMs, header, contextValues ?? o.contextValues());
      const start =
        entry.spec.kind === "server_streaming" ? serverStreaming(call, input) : otherStreaming(call, entry.spec, input);
      return call.response(true, new CallOutput(start, call, method.output)) as unknown as StreamResponse<never, never>;
    },
  };

  /**
   * The interceptors around a server-streaming implementation, with no
   * generator of our own in between: each suspended layer of an idle SSE
   * stream costs memory (connect's own invoke path adds three).
   */
  function serverStreaming(call: DirectCall, input: AsyncIterable<unknown>) {
    return async (): Promise<AsyncIterator<Message>> => {
      const res = await streamChain(call.request(true, input));
      call.mergeResponseHeaders(res);
      // The handler has its context and keeps what it needs of it; the
      // call, open for as long as its stream (an SSE follower: hours), does
      // not keep it (with its values: RequestInfo, the caller's AuthContext).
      call.letGoOfContext();
      return res.message[Symbol.asyncIterator]() as AsyncIterator<Message>;
    };
  }

  /** Client and bidi streams (no REST route has one) through connect's own path. */
  function otherStreaming(call: DirectCall, spec: MethodImplSpec, input: AsyncIterable<unknown>) {
    return async (): Promise<AsyncIterator<Message>> =>
      transformInvokeImplementation(
        spec,
        call.context,
        o.interceptors,
      )(input as AsyncIterable<never>)[Symbol.asyncIterator]() as AsyncIterator<Message>;
  }
}

/**
 * The direct transport: a Transport, and `unaryWith`, a unary call given
 * the caller's CallController (http/adopt.ts) in place of a signal, made
 * the call's own: no AbortSignal is made unless the call asks for one (a
 * handler or an interceptor reading its signal).
 */
export interface DirectTransport extends Transport {
  unaryWith(
    method: DescMethodUnary,
    controller: CallController,
    timeoutMs: number | undefined,
    header: HeadersInit | LazyHeaders | undefined,
    input: unknown,
    contextValues?: ContextValues,
  ): Promise<UnaryResponse>;
}

/** The innermost step of a unary call: its implementation, with the context the interceptors passed on. */
async function invokeUnary(req: UnaryRequest): Promise<UnaryResponse> {
  const call = callOf(req);
  const spec = call.entry.spec as MethodImplSpec & { kind: "unary" };
  const message = await spec.impl(req.message as never, call.handlerContext(req));
  return call.answered(create(spec.method.output, message as never));
}

/**
 * The innermost step of a server stream: its implementation, given the one
 * request message (taken without an await when it is oneMessage's).
 */
function invokeServerStreaming(req: StreamRequest): Promise<StreamResponse> {
  const it = req.message[Symbol.asyncIterator]();
  const taken = takeNow(it);
  if (!taken) return it.next().then((first) => startServerStreaming(req, first));
  try {
    return Promise.resolve(startServerStreaming(req, taken));
  } catch (e) {
    return Promise.reject(e);
  }
}

function startServerStreaming(req: StreamRequest, first: IteratorResult<unknown>): StreamResponse {
  const call = callOf(req);
  const spec = call.entry.spec as MethodImplSpec & { kind: "server_streaming" };
  if (first.done) throw new ConnectError("missing input message for server-streaming method", Code.Unimplemented);
  const output = spec.impl(first.value as never, call.handlerContext(req));
  return call.response(true, output) as unknown as StreamResponse;
}

function callOf(req: object): DirectCall {
  const call = (req as Tagged)[kCall];
  if (!call) throw new ConnectError("an interceptor passed on a request of its own making", Code.Internal);
  return call;
}

function noDeadline(): undefined {
  return undefined;
}

/** A context's timeoutMs() (not bound to a name of its own: the bundles' keepNames would name each one). */
function remainingUntil(deadline: number): () => number {
  return () => deadline - Date.now();
}

function deadlineReached(call: DirectCall): void {
  call.controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
}

// Accessors shared by every call's requests and responses (the same
// functions, so their shapes are shared too): each reads its call's
// headers, making them on first use. Own properties, not a class's: a
// spread of a request or a response (interceptors make them) copies their
// values.
const accessor = (get: (call: DirectCall) => Headers, set: (call: DirectCall, h: Headers) => void) => ({
  get(this: Tagged) {
    return get(this[kCall]!);
  },
  set(this: Tagged, h: Headers) {
    set(this[kCall]!, h);
  },
  enumerable: true,
  configurable: true,
});
const REQUEST_HEADER = accessor(
  (c) => c.requestHeader(),
  (c, h) => c.setRequestHeader(h),
);
const RESPONSE_HEADER = accessor(
  (c) => c.responseHeader(),
  (c, h) => c.setResponseHeader(h),
);
const RESPONSE_TRAILER = accessor(
  (c) => c.responseTrailer(),
  (c, h) => c.setResponseTrailer(h),
);
/** A request's signal, made on first read; one an interceptor sets is the request's own (data) property. */
const REQUEST_SIGNAL = {
  get(this: Tagged) {
    return this[kCall]!.signal;
  },
  set(this: Tagged, signal: AbortSignal) {
    Object.defineProperty(this, "signal", { value: signal, writable: true, enumerable: true, configurable: true });
  },
  enumerable: true,
  configurable: true,
};
const REQUEST_PROPERTIES = { signal: REQUEST_SIGNAL, header: REQUEST_HEADER };
const RESPONSE_HEADERS = { header: RESPONSE_HEADER, trailer: RESPONSE_TRAILER };

/**
 * A handler's context. Its signal (DirectCall.handlerSignal: made on first
 * read; most handlers never look at it, and a signal's abort at the call's
 * end costs an Event and its dispatch) and headers (made on first use) are
 * accessors of the class, not own properties as on a request: defining
 * four accessors on every context (Object.defineProperties, a runtime
 * call) cost ~2.5 us here, against ~0.1 us for a class's instance
 * (packages/bench/ANALYSIS.md, verify-token). A spread
 * of a context would not copy them: nothing spreads a handler's context
 * (interceptors spread requests and responses, whose accessors are own).
 */
class CallContext {
  readonly service: DescService;
  readonly method: DescMethod;
  readonly protocolName = "rest";
  readonly requestMethod = "POST";
  readonly url: string;
  readonly [kCall]: DirectCall;

  constructor(
    call: DirectCall,
    readonly timeoutMs: () => number | undefined,
    public values: ContextValues,
  ) {
    this.service = call.method.parent;
    this.method = call.method;
    this.url = call.entry.url;
    this[kCall] = call;
  }

  get signal(): AbortSignal {
    return this[kCall].handlerSignal();
  }

  set signal(signal: AbortSignal) {
    this[kCall].setHandlerSignal(signal);
  }

  get requestHeader(): Headers {
    return this[kCall].requestHeader();
  }

  set requestHeader(h: Headers) {
    this[kCall].setRequestHeader(h);
  }

  get responseHeader(): Headers {
    return this[kCall].responseHeader();
  }

  set responseHeader(h: Headers) {
    this[kCall].setResponseHeader(h);
  }

  get responseTrailer(): Headers {
    return this[kCall].responseTrailer();
  }

  set responseTrailer(h: Headers) {
    this[kCall].setResponseTrailer(h);
  }
}

/**
 * One call: its CallController (the caller's own when it handed or offered
 * it, http/adopt.ts: the REST and gRPC paths; else one following the
 * caller's signal; its AbortSignal made only when asked for), its deadline, its headers (made on first use) and the context its
 * handler gets. (Connect's createHandlerContext links three signals per
 * call and makes three Headers; with thousands of idle SSE streams each one
 * counts.)
 */
class DirectCall {
  readonly controller: CallController;
  /** The handler's context; let go once a server stream is open (letGoOfContext). */
  #context: (HandlerContext & Tagged) | undefined;
  readonly #follow: FollowAbort | undefined;
  readonly #callerSignal: AbortSignal | undefined;
  readonly #timer: NodeJS.Timeout | undefined;
  #requestSource: HeadersInit | LazyHeaders | undefined;
  #requestHeader: Headers | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;
  /** The signal an interceptor passed on in place of the call's (the handler's then). */
  #handlerSignal: AbortSignal | undefined;
  /** The implementation's unary answer (answered). */
  #answer: UnaryResponse | undefined;

  constructor(
    readonly method: DescMethod,
    readonly entry: MethodEntry,
    caller: AbortSignal | CallController | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | LazyHeaders | undefined,
    values: ContextValues,
  ) {
    const callerSignal = caller instanceof CallController ? undefined : caller;
    const adopted = caller instanceof CallController ? caller : adoptController(callerSignal);
    this.controller = adopted ?? new CallController();
    if (!adopted && callerSignal) {
      this.#callerSignal = callerSignal;
      this.#follow = new FollowAbort(this.controller, callerSignal);
      if (callerSignal.aborted) this.#follow.handleEvent();
      else callerSignal.addEventListener("abort", this.#follow, { once: true });
    }
    this.#requestSource = header;
    if (timeoutMs !== undefined) this.#timer = setTimeout(deadlineReached, timeoutMs, this);
    this.#context = new CallContext(
      this,
      timeoutMs === undefined ? noDeadline : remainingUntil(Date.now() + timeoutMs),
      values,
    ) as unknown as HandlerContext & Tagged;
  }

  get context(): HandlerContext & Tagged {
    const context = this.#context;
    if (!context) throw new ConnectError("the call's context is let go once its stream is open", Code.Internal);
    return context;
  }

  /**
   * Lets go of the handler's context (and its values) once the call's
   * stream is open: the call keeps its controller, timer and headers, which
   * is all an open stream's end needs. ~0.5-1 KiB an idle SSE stream.
   */
  letGoOfContext(): void {
    this.#context = undefined;
  }

  /** The call's signal (made on first use). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The handler's signal: the one an interceptor passed on, else the call's. */
  handlerSignal(): AbortSignal {
    return this.#handlerSignal ?? this.controller.signal;
  }

  setHandlerSignal(signal: AbortSignal): void {
    this.#handlerSignal = signal;
  }

  requestHeader(): Headers {
    if (!this.#requestHeader) {
      const source = this.#requestSource;
      this.#requestSource = undefined;
      this.#requestHeader =
        source instanceof Headers
          ? source
          : typeof (source as LazyHeaders | undefined)?.toHeaders === "function"
            ? (source as LazyHeaders).toHeaders()
            : new Headers(source as HeadersInit | undefined);
    }
    return this.#requestHeader;
  }

  setRequestHeader(h: Headers): void {
    this.#requestSource = undefined;
    this.#requestHeader = h;
  }

  /** Lets go of the request headers (forgetRequestHeader); a later read gets empty ones. */
  forgetRequestHeader(): void {
    this.#requestSource = undefined;
    this.#requestHeader = undefined;
  }

  responseHeader(): Headers {
    this.#responseHeader ??= new Headers();
    return this.#responseHeader;
  }

  setResponseHeader(h: Headers): void {
    this.#responseHeader = h;
  }

  responseTrailer(): Headers {
    this.#responseTrailer ??= new Headers();
    return this.#responseTrailer;
  }

  setResponseTrailer(h: Headers): void {
    this.#responseTrailer = h;
  }

  /** The response headers set so far; undefined when nothing asked for them. */
  sentHeader(): Headers | undefined {
    return this.#responseHeader;
  }

  sentTrailer(): Headers | undefined {
    return this.#responseTrailer;
  }

  /** The request the interceptors get. */
  request(stream: boolean, message: unknown): UnaryRequest & StreamRequest {
    const req = {
      stream,
      service: this.method.parent,
      method: this.method,
      requestMethod: "POST",
      url: this.entry.url,
      contextValues: this.context.values,
      message,
      [kCall]: this,
    };
    return Object.defineProperties(req, REQUEST_PROPERTIES) as unknown as UnaryRequest & StreamRequest;
  }

  /** A response of this call: its headers are the call's. */
  response(stream: boolean, message: unknown): UnaryResponse & StreamResponse {
    const res = { stream, service: this.method.parent, method: this.method, message, [kCall]: this };
    return Object.defineProperties(res, RESPONSE_HEADERS) as unknown as UnaryResponse & StreamResponse;
  }

  /** The implementation's answer (invokeUnary), as the interceptors got it. */
  answered(message: unknown): UnaryResponse {
    const res = this.response(false, message) as unknown as UnaryResponse;
    this.#answer = res;
    return res;
  }

  /**
   * A unary call's response as its caller gets it: the implementation's
   * own, when the interceptors passed it on (its headers are the call's
   * already; one object with two accessors fewer a call), else a new one
   * with the headers of the interceptors' answer adopted.
   */
  unaryAnswer(res: UnaryResponse): UnaryResponse {
    if (res === this.#answer) return res;
    this.adoptResponseHeaders(res);
    return this.response(false, res.message) as unknown as UnaryResponse;
  }

  /**
   * The handler's context: the call's, with what the interceptors passed on
   * in `req` in place of the call's own (signal, values, headers), as
   * Connect's invoke path gives a handler.
   */
  handlerContext(req: UnaryRequest | StreamRequest): HandlerContext {
    const context = this.context as { values: ContextValues };
    // A signal the interceptors passed on (their own, or the call's read into a copy of the request).
    const signal = Object.getOwnPropertyDescriptor(req, "signal");
    if (signal && !signal.get) this.#handlerSignal = signal.value as AbortSignal;
    if (req.contextValues !== context.values) context.values = req.contextValues;
    const header = Object.getOwnPropertyDescriptor(req, "header");
    if (header && !header.get && header.value !== this.#requestHeader) this.setRequestHeader(header.value as Headers);
    return this.context;
  }

  /** A unary answer's headers, when an interceptor answered with others than the call's: they replace the call's. */
  adoptResponseHeaders(res: UnaryResponse): void {
    const header = ownValue(res, "header");
    if (header && header !== this.#responseHeader) replaceHeaders(header, this.responseHeader());
    const trailer = ownValue(res, "trailer");
    if (trailer && trailer !== this.#responseTrailer) replaceHeaders(trailer, this.responseTrailer());
  }

  /** A stream's headers, when an interceptor answered with others than the call's: added to the call's. */
  mergeResponseHeaders(res: StreamResponse): void {
    const header = ownValue(res, "header");
    if (header && header !== this.#responseHeader) copyInto(header, this.responseHeader());
  }

  /**
   * `work`, or the call's abort reason once it is aborted (deadline, caller
   * gone, shutdown), even if the handler does not watch its signal.
   */
  untilAborted<T>(work: Promise<T>): Promise<T> {
    const controller = this.controller;
    if (controller.aborted) {
      work.catch(() => {});
      return Promise.reject(controller.reason);
    }
    return new Promise<T>((resolve, reject) => {
      controller.onAbort = reject;
      work.then(resolve, reject);
    });
  }

  /**
   * Ends the call: its signal, if one was made, aborts with `reason` (one
   * asked for later is aborted already); its timer and link to the caller's
   * signal go. The rejection of untilAborted goes first (it would have
   * nothing left to reject).
   */
  abort(reason: unknown): void {
    clearTimeout(this.#timer);
    if (this.#follow) this.#callerSignal!.removeEventListener("abort", this.#follow);
    this.controller.onAbort = undefined;
    this.controller.abort(reason);
  }

  /**
   * Over the wire, headers a handler set before failing travel with the error
   * and a client sees them as the error's metadata (e.g. Retry-After).
   */
  withResponseHeaders(e: unknown): ConnectError {
    const err = ConnectError.from(e);
    for (const sent of [this.#responseHeader, this.#responseTrailer]) {
      sent?.forEach((v, k) => {
        if (!err.metadata.has(k)) err.metadata.set(k, v);
      });
    }
    return err;
  }
}

/**
 * The headers and trailers a response of the transport carries, without
 * making them when nothing set any (undefined then).
 */
export function sentHeaders(res: UnaryResponse | StreamResponse): {
  header: Headers | undefined;
  trailer: Headers | undefined;
} {
  const call = (res as Tagged)[kCall];
  if (call && Object.getOwnPropertyDescriptor(res, "header")?.get)
    return { header: call.sentHeader(), trailer: call.sentTrailer() };
  return { header: res.header, trailer: res.trailer };
}

/**
 * Lets go of the request headers of a call of this transport, once its
 * stream is open and its handler has read what it needs of them (the REST
 * handler does so for an SSE stream, which may stay open for hours: a
 * Headers object with every request header, ~0.5 KiB a stream). A read of
 * them after this gets empty headers.
 */
export function forgetRequestHeader(res: UnaryResponse | StreamResponse): void {
  (res as Tagged)[kCall]?.forgetRequestHeader();
}

/** An own data property's value (not an accessor's). */
function ownValue(o: object, key: string): Headers | undefined {
  const d = Object.getOwnPropertyDescriptor(o, key);
  return d && !d.get ? (d.value as Headers | undefined) : undefined;
}

function copyInto(from: Headers, to: Headers): void {
  if (from === to) return;
  from.forEach((v, k) => {
    to.set(k, v);
  });
}

/** As connect's invoke path does with a unary answer's headers: `to` becomes a copy of `from`. */
function replaceHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const k of [...to.keys()]) to.delete(k);
  copyInto(from, to);
}

/**
 * Aborts the call's controller when its caller's signal aborts. An object
 * with handleEvent rather than a closure: one per open call, and a named
 * closure also carries a dictionary of properties (keepNames: the services
 * are bundled, as tsx transpiles, with each closure's `name` kept).
 */
class FollowAbort {
  constructor(
    private readonly controller: CallController,
    private readonly caller: AbortSignal,
  ) {}

  handleEvent(): void {
    this.controller.abort(getAbortSignalReason(this.caller));
  }
}

/**
 * A stream's output: ends the call when the stream ends, fails or is given
 * up, and fails a pending read when the call is aborted (deadline, client
 * gone, shutdown) even if the handler does not watch its signal.
 */
class CallOutput implements AsyncIterableIterator<Message>, Parkable {
  #source: Promise<AsyncIterator<Message>> | undefined;
  /** The started call's stream, once it is there. */
  #it: AsyncIterator<Message> | undefined;
  /** Starts the call; let go once it has (it holds the call's request: headers and message). */
  #start: (() => Promise<AsyncIterator<Message>>) | undefined;
  /** The abort listener (one per call) rejects the pending read, if any, through this. */
  #rejectRead: ((reason: unknown) => void) | undefined;
  /** Parked on the stream (park): woken by the stream, or by the call's abort. */
  #parked: Waiter | undefined;
  #listening = false;
  /**
   * The stream watches the call's signal itself (Parkable.endsOnAbort, told
   * at its first park): this object listens no more; a read that settles
   * once the call is aborted fails with the abort's reason, as the listener
   * would have failed it.
   */
  #streamEndsOnAbort = false;
  constructor(
    start: () => Promise<AsyncIterator<Message>>,
    private readonly call: DirectCall,
    private readonly output: DescMessage,
  ) {
    this.#start = start;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /**
   * Parks on the started stream when it can (Parkable); the call's abort
   * wakes the waiter too: through this object's abort listener, or, when
   * the stream watches the call's signal itself (endsOnAbort: an agents
   * follow), through the stream's, and this one is let go (one listener an
   * idle SSE stream, not two).
   */
  park(waiter: Waiter): boolean {
    const it = this.#it;
    const { signal } = this.call;
    if (!it || this.#rejectRead || signal.aborted) return false;
    const parkable = parkableOf(it);
    if (!parkable?.park(waiter)) return false;
    this.#parked = waiter;
    if (!this.#streamEndsOnAbort && parkable.endsOnAbort?.(signal)) {
      this.#streamEndsOnAbort = true;
      if (this.#listening) {
        this.#listening = false;
        signal.removeEventListener("abort", this);
      }
    }
    this.#listen(signal);
    return true;
  }

  // Not an async function: an idle stream's pending read would keep its frame suspended.
  next(): Promise<IteratorResult<Message>> {
    this.#parked = undefined;
    if (this.call.signal.reason === callEnded) return Promise.resolve({ done: true, value: undefined });
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
        // Read directly from now on; the settled promise is not kept for the stream's life.
        this.#source = undefined;
        return this.#read(it);
      },
      (e: unknown) => {
        throw this.#failed(e);
      },
    );
  }

  /**
   * The stream's next message, or the call's failure: what the handler's
   * read gives (mapped), or the call's abort reason once it is aborted (the
   * abort listener rejects through #rejectRead). One promise and one
   * reaction per read, not #untilAborted's two and a third to map: an idle
   * SSE stream is a pending read at every layer, each a promise with its
   * reaction, closures and (under async_hooks) two async ids.
   */
  #read(it: AsyncIterator<Message>): Promise<IteratorResult<Message>> {
    let pending: Promise<IteratorResult<Message>>;
    try {
      pending = it.next();
    } catch (e) {
      return Promise.reject(this.#failed(e));
    }
    const { signal } = this.call;
    this.#listen(signal);
    if (signal.aborted) {
      pending.catch(() => {});
      return Promise.reject(this.#failed(getAbortSignalReason(signal)));
    }
    return new Promise<IteratorResult<Message>>((resolve, reject) => {
      this.#rejectRead = reject;
      pending.then(
        (r) => {
          if (this.#rejectRead !== reject) return;
          this.#rejectRead = undefined;
          // Aborted while the read was pending, with no listener here to fail it then (#streamEndsOnAbort).
          if (signal.aborted) {
            reject(this.#failed(getAbortSignalReason(signal)));
            return;
          }
          if (r.done) {
            this.#end();
            resolve(r);
            return;
          }
          try {
            // Implementations may yield plain objects.
            resolve({ done: false, value: create(this.output, r.value as never) as Message });
          } catch (e) {
            reject(this.#failed(e));
          }
        },
        (e: unknown) => {
          if (this.#rejectRead !== reject) return;
          this.#rejectRead = undefined;
          reject(this.#failed(e));
        },
      );
    });
  }

  /**
   * Ends the call (callEnded). The abort listener goes first when it has
   * nothing to do (no read pending, nothing parked), so the call's end costs
   * no dispatch to it: on Node 20 an object listener is run in an async
   * function, three promises with their async-context hooks on every
   * stream's way to its trailers.
   */
  #end(): void {
    if (this.#listening && !this.#rejectRead && !this.#parked) {
      this.#listening = false;
      this.call.signal.removeEventListener("abort", this);
    }
    this.call.abort(callEnded);
  }

  #listen(signal: AbortSignal): void {
    if (this.#listening || this.#streamEndsOnAbort) return;
    this.#listening = true;
    signal.addEventListener("abort", this, { once: true });
  }

  #begin(): Promise<AsyncIterator<Message>> {
    const start = this.#start!;
    this.#start = undefined;
    return start();
  }

  /** The error a failed read throws; the call is over. */
  #failed(e: unknown): ConnectError {
    const err = this.call.withResponseHeaders(e);
    this.#end();
    return err;
  }

  /**
   * `work`, or the call's abort reason once it is aborted. Not a
   * Promise.race against one long-lived aborted promise: each race leaves a
   * reaction on that promise holding its result (every message of the
   * stream) until the call ends, so a replay of 20,000 events held them all.
   */
  #untilAborted<T>(work: Promise<T>): Promise<T> {
    const { signal } = this.call;
    this.#listen(signal);
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

  /**
   * The call's abort: the pending read, if any, fails with its reason (a
   * read of the stream, as a failure of the call: #failed; the start's, as
   * is, for next() to fail). (The listener is this object: no closure per call.)
   */
  handleEvent(): void {
    const parked = this.#parked;
    this.#parked = undefined;
    parked?.wake();
    const reject = this.#rejectRead;
    if (!reject) return;
    this.#rejectRead = undefined;
    const reason = getAbortSignalReason(this.call.signal);
    reject(this.#it ? this.#failed(reason) : reason);
  }

  async return(): Promise<IteratorResult<Message>> {
    this.#end();
    const it = this.#it;
    if (it) {
      await it.return?.();
      return { done: true, value: undefined };
    }
    if (!this.#source) return { done: true, value: undefined };
    // A call still starting (an interceptor waiting) is not waited for: it
    // sees its signal aborted, and its stream is closed when it arrives.
    const started = this.#source;
    const source = await Promise.race([started, abortedPromise(this.call.signal)]).catch(() => undefined);
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
