import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** Latency buckets in seconds: 1 ms to 60 s (a login's password hash, a tool call's exec, a cold start). */
export const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

// HTTP methods outside this set are one label value, so a client cannot grow the series.
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * The metrics of one service process: its own registry (not prom-client's
 * global one, so several servers in one test process never clash), the
 * default process metrics, and the request families every server of the
 * process records into, told apart by the `server` label. A service adds its
 * own metrics to `registry`; the listeners of one process share one
 * ServerMetrics (ServerOptions.metrics) so one scrape shows all of it. The
 * process metrics start with the first server that serves /metrics
 * (`enableProcessMetrics`): they keep an event-loop-delay timer and a GC
 * observer running, which a server nobody scrapes (and a test process
 * with dozens of servers) should not pay for.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly #inflight = new Map<string, () => number>();
  #processMetrics = false;
  readonly httpRequests: Counter<"server" | "method" | "route" | "code">;
  readonly httpDuration: Histogram<"server" | "method" | "route" | "code">;
  readonly sseOpen: Gauge<"server" | "route">;
  readonly rpcHandled: Counter<"server" | "service" | "method" | "code">;
  readonly rpcDuration: Histogram<"server" | "service" | "method" | "code">;
  readonly rpcStreamsOpen: Gauge<"server" | "service" | "method">;

  constructor() {
    const registers = [this.registry];
    this.httpRequests = new Counter({
      name: "platform_http_requests_total",
      help: "HTTP requests answered, by listener, method, route template (or procedure path) and status code",
      labelNames: ["server", "method", "route", "code"],
      registers,
    });
    this.httpDuration = new Histogram({
      name: "platform_http_request_duration_seconds",
      help: "Time from a request's arrival to its response's end (an SSE or gRPC stream: its whole life)",
      labelNames: ["server", "method", "route", "code"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    const inflight = this.#inflight;
    new Gauge({
      name: "platform_http_requests_in_flight",
      help: "HTTP requests received and not yet answered in full, open streams included",
      labelNames: ["server"],
      registers,
      collect() {
        for (const [server, count] of inflight) this.set({ server }, count());
      },
    });
    this.sseOpen = new Gauge({
      name: "platform_sse_streams_open",
      help: "Server-Sent Events responses being streamed",
      labelNames: ["server", "route"],
      registers,
    });
    this.rpcHandled = new Counter({
      name: "platform_rpc_server_handled_total",
      help: "RPCs completed (gRPC, Connect, gRPC-Web and REST alike), by service, method and gRPC status code",
      labelNames: ["server", "service", "method", "code"],
      registers,
    });
    this.rpcDuration = new Histogram({
      name: "platform_rpc_server_handling_seconds",
      help: "Time an RPC's handler took, to its last message for server streams",
      labelNames: ["server", "service", "method", "code"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.rpcStreamsOpen = new Gauge({
      name: "platform_rpc_server_streams_open",
      help: "Server-streaming RPCs open (SSE streams included: they are server streams underneath)",
      labelNames: ["server", "service", "method"],
      registers,
    });
  }

  /** prom-client's default metrics (`process_*`, `nodejs_*`) in this registry, once. */
  enableProcessMetrics(): void {
    if (this.#processMetrics) return;
    this.#processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
  }

  /** A server of this process: its in-flight count is read at each scrape. */
  attach(server: string, inflight: () => number): void {
    this.#inflight.set(server, inflight);
  }

  /** One answered HTTP request; `route` must be a template or a known procedure path, never a raw path. */
  observeHttp(server: string, method: string | undefined, route: string, code: string, seconds: number): void {
    const labels = { server, method: method && METHODS.has(method) ? method : "other", route, code };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  /**
   * An SSE response began streaming; sseClosed marks its end (once for each
   * opening: the relay's end is). Two calls, not a closure returned for the
   * end: an idle stream would keep it, with its labels, for hours.
   */
  sseOpened(server: string, route: string): void {
    this.sseOpen.inc({ server, route });
  }

  sseClosed(server: string, route: string): void {
    this.sseOpen.dec({ server, route });
  }
}
