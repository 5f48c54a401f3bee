import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError, Interceptor, StreamResponse, UnaryResponse } from "@connectrpc/connect";
import type { Span } from "@opentelemetry/api";
import type { Logger } from "pino";
import { callEnded } from "../calls/direct-transport.ts";
import { type RequestInfo, requestInfoKey } from "../context.ts";
import { endsOnAbort, type Parkable, parkableOf, type Waiter } from "../calls/parkable.ts";
import { codeNameOf, observeRpc } from "../metrics/rpc-observe.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import { recordRpcStatus, serverRpcSpan } from "../tracing/rpc-spans.ts";
import { errorConverter } from "./interceptors.ts";

/**
 * Outermost interceptor of every server: the call's outcome as its caller
 * gets it. Whatever the call throws leaves converted as errorInterceptor
 * converts it; the request's server span gets the RPC's name and its gRPC
 * status (when this process records spans); the call is counted and timed
 * by service, method and status, and open server streams are counted. A
 * stream ends when its last message is taken, it fails, or its reader stops
 * (return): CANCELLED if the call was aborted by its caller (a client gone),
 * else OK: the in-process transport's own end of the call (an SSE reader
 * stopping at the terminal event) is no cancellation. A reader that stops
 * early leaves no status on the span.
 *
 * One layer where there were three (metrics, trace, error): each was an
 * async function around every call, and each wrapped a server stream in an
 * iterator of its own that an open stream (an idle SSE follower) kept, with
 * a pending promise per layer.
 */
export function callOutcomeInterceptor(metrics: ServerMetrics, server: string, fallback: Logger): Interceptor {
  const convert = errorConverter(fallback);
  return (next) => async (req) => {
    const outcome = new CallOutcome(metrics, server, convert, req.method, req.contextValues.get(requestInfoKey));
    let res: UnaryResponse | StreamResponse;
    try {
      res = await next(req);
    } catch (e) {
      throw outcome.failed(e);
    }
    if (!res.stream) {
      outcome.ended("OK");
      return res;
    }
    // The signal is read for a stream only (how it ended): a unary call's is never made (http/adopt.ts).
    outcome.opened(res.message, req.signal);
    // The response is this call's own: changed rather than copied (a copy would read its headers, which
    // the direct transport makes on first use).
    (res as { message: unknown }).message = outcome;
    return res;
  };
}

/** One call's outcome; a server stream's messages pass through it (an iterator object, no generator). */
class CallOutcome implements AsyncIterableIterator<unknown>, Parkable {
  readonly #started = performance.now();
  readonly #span: Span | undefined;
  #source: AsyncIterable<unknown> | undefined;
  #it: AsyncIterator<unknown> | undefined;
  #ended = false;
  /** The call's signal, once it is a stream. */
  #signal: AbortSignal | undefined;

  constructor(
    private readonly metrics: ServerMetrics,
    private readonly server: string,
    private readonly convert: (e: unknown, procedure: string, info: RequestInfo | undefined) => ConnectError,
    private readonly method: DescMethod,
    private readonly info: RequestInfo | undefined,
  ) {
    this.#span = serverRpcSpan(method.parent.typeName, method.name);
  }

  /** What the call throws instead of `e`; the call ended with it. */
  failed(e: unknown): ConnectError {
    const err = this.convert(e, `${this.method.parent.typeName}/${this.method.name}`, this.info);
    if (this.#span) recordRpcStatus(this.#span, err);
    this.#count(codeNameOf(err));
    return err;
  }

  /** The call ended with `code` (a unary answer, or a stream's last message taken: OK). */
  ended(code: string): void {
    if (this.#span && code === "OK") recordRpcStatus(this.#span);
    this.#count(code);
  }

  #count(code: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const { parent, name } = this.method;
    if (this.#source) this.metrics.streamsOpen(this.server, parent.typeName, name).dec();
    observeRpc(this.metrics, this.server, parent.typeName, name, this.#started, code);
  }

  opened(source: AsyncIterable<unknown>, signal: AbortSignal): void {
    this.#source = source;
    this.#signal = signal;
    const { parent, name } = this.method;
    this.metrics.streamsOpen(this.server, parent.typeName, name).inc();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  #iterator(): AsyncIterator<unknown> {
    this.#it ??= this.#source![Symbol.asyncIterator]();
    return this.#it;
  }

  /** Parks on the stream when it can (Parkable): an idle stream's read goes on through next() once woken. */
  park(waiter: Waiter): boolean {
    return !this.#ended && this.#it !== undefined && (parkableOf(this.#it)?.park(waiter) ?? false);
  }

  /** Whether the stream watches `signal` itself (Parkable.endsOnAbort): this layer adds no wait of its own. */
  endsOnAbort(signal: AbortSignal): boolean {
    return endsOnAbort(this.#it, signal);
  }

  /** How a stream that ends ended: CANCELLED once its caller aborted it (a client gone), whoever saw the end first. */
  #endCode(): string {
    const signal = this.#signal;
    return signal?.aborted && signal.reason !== callEnded ? "CANCELLED" : "OK";
  }

  next(): Promise<IteratorResult<unknown>> {
    if (this.#ended) return Promise.resolve({ done: true, value: undefined });
    let pending: Promise<IteratorResult<unknown>>;
    try {
      pending = this.#iterator().next();
    } catch (e) {
      return Promise.reject(this.failed(e));
    }
    return pending.then(
      (r) => {
        if (r.done) this.ended(this.#endCode());
        return r;
      },
      (e: unknown) => {
        throw this.failed(e);
      },
    );
  }

  async return(value?: unknown): Promise<IteratorResult<unknown>> {
    const open = !this.#ended;
    this.#count(this.#endCode());
    if (!open || !this.#it?.return) return { done: true, value };
    try {
      await this.#it.return(value);
    } catch (e) {
      const err = this.convert(e, `${this.method.parent.typeName}/${this.method.name}`, this.info);
      if (this.#span) recordRpcStatus(this.#span, err);
      throw err;
    }
    return { done: true, value };
  }

  async throw(e?: unknown): Promise<IteratorResult<unknown>> {
    this.#count(codeNameOf(e));
    throw e;
  }
}
