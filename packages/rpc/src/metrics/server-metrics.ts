import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { GaugeSeries, level, TimedSeries } from "./series.ts";

/** Latency buckets in seconds: 1 ms to 60 s (a login's password hash, a tool call's exec, a cold start). */
export const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

// HTTP methods outside this set are one label value, so a client cannot grow the series.
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

type HttpLabel = "server" | "method" | "route" | "code";
type RpcLabel = "server" | "service" | "method" | "code";
type StreamLabel = "server" | "service" | "method";
const HTTP_LABELS: HttpLabel[] = ["server", "method", "route", "code"];
const RPC_LABELS: RpcLabel[] = ["server", "service", "method", "code"];
const STREAM_LABELS: StreamLabel[] = ["server", "service", "method"];

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
  readonly httpRequests: Counter<HttpLabel>;
  readonly httpDuration: Histogram<HttpLabel>;
  readonly sseOpen: Gauge<"server" | "route">;
  readonly rpcHandled: Counter<RpcLabel>;
  readonly rpcDuration: Histogram<RpcLabel>;
  readonly rpcStreamsOpen: Gauge<StreamLabel>;
  // Each label set's series, found once (series.ts): server, then service (or method), ...
  readonly #rpcSeries = new Map<string, Map<string, Map<string, Map<string, TimedSeries<RpcLabel>>>>>();
  readonly #httpSeries = new Map<string, Map<string, Map<string, Map<string, TimedSeries<HttpLabel>>>>>();
  readonly #streamSeries = new Map<string, Map<string, Map<string, GaugeSeries<StreamLabel>>>>();

  constructor() {
    const registers = [this.registry];
    this.httpRequests = new Counter({
      name: "platform_http_requests_total",
      help: "HTTP requests answered, by listener, method, route template (or procedure path) and status code",
      labelNames: HTTP_LABELS,
      registers,
    });
    this.httpDuration = new Histogram({
      name: "platform_http_request_duration_seconds",
      help: "Time from a request's arrival to its response's end (an SSE or gRPC stream: its whole life)",
      labelNames: HTTP_LABELS,
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
      labelNames: RPC_LABELS,
      registers,
    });
    this.rpcDuration = new Histogram({
      name: "platform_rpc_server_handling_seconds",
      help: "Time an RPC's handler took, to its last message for server streams",
      labelNames: RPC_LABELS,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.rpcStreamsOpen = new Gauge({
      name: "platform_rpc_server_streams_open",
      help: "Server-streaming RPCs open (SSE streams included: they are server streams underneath)",
      labelNames: STREAM_LABELS,
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
    const m = method && METHODS.has(method) ? method : "other";
    const byCode = level(level(level(this.#httpSeries, server), m), route);
    let series = byCode.get(code);
    if (!series) {
      const labels = { server, method: m, route, code };
      series = new TimedSeries(this.httpRequests, this.httpDuration, HTTP_LABELS, labels);
      byCode.set(code, series);
    }
    series.add(seconds);
  }

  /** One ended RPC: counted and timed by service, method and gRPC status name. */
  observeRpc(server: string, service: string, method: string, code: string, seconds: number): void {
    const byCode = level(level(level(this.#rpcSeries, server), service), method);
    let series = byCode.get(code);
    if (!series) {
      series = new TimedSeries(this.rpcHandled, this.rpcDuration, RPC_LABELS, { server, service, method, code });
      byCode.set(code, series);
    }
    series.add(seconds);
  }

  /** The open server streams' gauge of one method (inc when one opens, dec when it ends). */
  streamsOpen(server: string, service: string, method: string): GaugeSeries<StreamLabel> {
    const byMethod = level(level(this.#streamSeries, server), service);
    let series = byMethod.get(method);
    if (!series) {
      series = new GaugeSeries(this.rpcStreamsOpen, STREAM_LABELS, { server, service, method });
      byMethod.set(method, series);
    }
    return series;
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
