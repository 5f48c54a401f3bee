import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { callEnded } from "../calls/direct-transport.ts";
import type { ServerMetrics } from "./server-metrics.ts";

// gRPC's canonical names (OK, NOT_FOUND, ...), what grpc-prometheus and most dashboards label with.
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

function codeOf(e: unknown): string {
  return CODE_NAMES[ConnectError.from(e).code] ?? "UNKNOWN";
}

/**
 * Counts and times every RPC by service, method and status, and keeps the
 * number of open server streams. It runs outermost, so the status it sees is
 * the one the caller gets (after the error interceptor's conversion). A
 * stream ends when its last message is taken, it fails, or its reader stops
 * (return): CANCELLED if the call was aborted by its caller (a client gone),
 * else OK: the in-process transport's own end of the call (an SSE reader
 * stopping at the terminal event) is no cancellation.
 */
export function metricsInterceptor(metrics: ServerMetrics, server: string): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    const labels = { server, service: req.service.typeName, method: req.method.name, code: "" };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (e) {
      handled(metrics, labels, started, codeOf(e));
      throw e;
    }
    if (!res.stream) {
      handled(metrics, labels, started, "OK");
      return res;
    }
    metrics.rpcStreamsOpen.inc({ server, service: labels.service, method: labels.method });
    return { ...res, message: new CountedStream(res.message, metrics, labels, started, req.signal) } as typeof res;
  };
}

type CallLabels = { server: string; service: string; method: string; code: string };

function handled(metrics: ServerMetrics, labels: CallLabels, started: number, code: string): void {
  const done = { ...labels, code };
  metrics.rpcHandled.inc(done);
  metrics.rpcDuration.observe(done, (performance.now() - started) / 1000);
}

/**
 * A stream's messages, counted when it ends. An object with methods, not an
 * async generator or closures: an open stream (an idle SSE follower) keeps
 * its reader for as long as it lasts, and a suspended frame or a handful of
 * closures per stream add up over thousands.
 */
class CountedStream implements AsyncIterableIterator<unknown> {
  #it: AsyncIterator<unknown> | undefined;
  #ended = false;

  constructor(
    private readonly source: AsyncIterable<unknown>,
    private readonly metrics: ServerMetrics,
    private readonly labels: CallLabels,
    private readonly started: number,
    private readonly signal: AbortSignal,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  #source(): AsyncIterator<unknown> {
    this.#it ??= this.source[Symbol.asyncIterator]();
    return this.#it;
  }

  #end(code: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const { server, service, method } = this.labels;
    this.metrics.rpcStreamsOpen.dec({ server, service, method });
    handled(this.metrics, this.labels, this.started, code);
  }

  next(): Promise<IteratorResult<unknown>> {
    let pending: Promise<IteratorResult<unknown>>;
    try {
      pending = this.#source().next();
    } catch (e) {
      this.#end(codeOf(e));
      return Promise.reject(e);
    }
    return pending.then(
      (r) => {
        if (r.done) this.#end("OK");
        return r;
      },
      (e: unknown) => {
        this.#end(codeOf(e));
        throw e;
      },
    );
  }

  async return(value?: unknown): Promise<IteratorResult<unknown>> {
    this.#end(this.signal.aborted && this.signal.reason !== callEnded ? "CANCELLED" : "OK");
    const it = this.#source();
    return it.return ? it.return(value) : { done: true as const, value };
  }

  async throw(e?: unknown): Promise<IteratorResult<unknown>> {
    this.#end(codeOf(e));
    const it = this.#source();
    if (it.throw) return it.throw(e);
    throw e;
  }
}
