import type { DescMethodServerStreaming, Message } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import type { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { ServiceRegistration } from "../calls/registration.ts";
import type { Envelope, EnvelopeName } from "../envelope.ts";
import type { HealthRegistry } from "../health/health.ts";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";
import type { ServerMetrics } from "../metrics/server-metrics.ts";
import type { CallerPolicy } from "../tls/callers.ts";
import type { ServiceTls } from "../tls/service-tls.ts";
import type { OutputJsonOptions } from "../transcode/json.ts";
import type { RequestHead } from "./first-request.ts";
import type { InputRefusal } from "./input-guard.ts";

export type { ServiceRegistration };

/** What `createServer` serves and how (every field but name, services and envelope has a default). */
export interface ServerOptions {
  /** Service name for logs (e.g. "identity"). */
  name: string;
  services: ServiceRegistration[];
  /** REST error body format. */
  envelope: EnvelopeName | Envelope;
  /**
   * Whether a request's RequestInfo is also the current request on its
   * async path (context.ts's AsyncLocalStorage), default true: log lines of
   * any logger written while it is served (the pino mixin) and calls to
   * other services made for it (propagateRequestIds) carry its ids. False:
   * it reaches the handlers and interceptors only through the call's
   * context values (requestInfo(ctx)). For a service that calls no other
   * service and logs a request only through requestInfo(ctx): on Node 20 an
   * AsyncLocalStorage once used turns on promise hooks for the whole
   * process, a JavaScript callback for every promise and nextTick.
   */
  asyncRequestContext?: boolean;
  /** Run after the built-in error interceptor, for gRPC, Connect and REST alike. */
  interceptors?: Interceptor[];
  /** /readyz answers 200 only when this resolves true. */
  readiness?: () => Promise<boolean>;
  port?: number;
  host?: string;
  /**
   * A second port (e.g. identity's 50051). It serves exactly what the main
   * port serves; both sniff HTTP/1.1 vs h2c.
   */
  grpcPort?: number;
  /** BODY_LIMIT_BYTES; default 1 MiB. Applies to REST bodies and RPC messages. */
  bodyLimitBytes?: number;
  /** REQUEST_TIMEOUT in ms for unary calls without their own deadline; default 30 s; 0: none. */
  requestTimeoutMs?: number;
  /** Deadline of server-streaming calls without their own; default none. */
  streamTimeoutMs?: number;
  /** READ_HEADER_TIMEOUT in ms; default 5 s. */
  readHeaderTimeoutMs?: number;
  /** SHUTDOWN_TIMEOUT in ms; default 30 s. */
  shutdownTimeoutMs?: number;
  logger?: Logger;
  /** SSE comment ping interval; default 15 s. */
  ssePingMs?: number;
  /** REST/SSE JSON rendering. */
  json?: OutputJsonOptions;
  /** Reject unknown fields in REST bodies (default: ignored, like proto3 JSON parsers may). */
  strictBody?: boolean;
  /**
   * The SSE error event for a stream that fails mid-way, for contracts whose
   * streamed message has no `error` oneof variant (e.g. agents' `{"type":"error"}`).
   */
  sseErrorEvent?: (err: PlatformError, method: DescMethodServerStreaming) => Message | undefined;
  /**
   * The service's own error for a request string holding U+0000 or a lone
   * surrogate, where its contract names one (default: INVALID_ARGUMENT).
   */
  inputRefusal?: InputRefusal;
  /**
   * The ports are internal. With `tls` they speak TLS only (HTTP/2 by ALPN,
   * HTTP/1.1 for gRPC-Web and Connect), require a client certificate from its
   * CA and refuse any caller `callers` does not list for the method
   * (PERMISSION_DENIED caller_not_allowed; health and reflection are open to
   * every certificate of the CA). Without `tls` (INTERNAL_TLS=off) they are
   * plaintext, with a warning at start.
   */
  internal?: { tls: ServiceTls | undefined; callers: CallerPolicy };
  /**
   * A public port: REST/SSE routes and /livez /healthz /readyz only; gRPC,
   * Connect and gRPC-Web calls are refused (404), health and reflection too.
   */
  restOnly?: boolean;
  /**
   * CORS for browsers on other origins (public ports): the allowed origins,
   * e.g. from CORS_ALLOWED_ORIGINS (`parseAllowedOrigins`). Unset or empty:
   * no CORS headers, and a preflight is 403 `origin_not_allowed`.
   */
  cors?: { allowedOrigins: readonly string[] };
  /**
   * Public, read-only JSON documents by path (`/openapi.json`: the port's
   * OpenAPI document), served on GET and HEAD like the health endpoints:
   * before shedding and routing, without a credential. Nothing secret.
   */
  documents?: Readonly<Record<string, unknown>>;
  /**
   * Refuses a request before it is routed, its body read or its handler run,
   * with the returned error (rendered by the envelope, with Retry-After): for
   * work the service knows it cannot take now (identity: a login while the
   * password hashing queue is full). Under a storm every request costs the
   * event loop its routing, body parsing and interceptors; a refusal here
   * skips them, so the loop gets through the listen queue several times
   * faster. Never called for the health endpoints, /metrics or the
   * documents, nor for a gRPC or Connect call. An HTTP/1.1 request without
   * an Origin is offered to it as it enters, before its ids' context, trace
   * context and access log line are made (requests.ts earlyRefusals: its
   * refusals are logged as counts); any other after CORS. The first request
   * of a new plaintext HTTP/1.1 connection is offered to it even earlier,
   * from the connection's first bytes (`req` then only its head: method,
   * target, headers): refused there, it is answered with
   * `connection: close` and no HTTP parser is made for it (requests.ts
   * refuseFirst). It must be cheap and may return one shared error object
   * (its rendering is kept).
   */
  shed?: (req: RequestHead, path: string) => PlatformError | undefined;
  /**
   * A public port's requests that match none of its REST routes (by path:
   * a known path with another method stays 405) nor its health, metrics and
   * documents paths: served by this instead of the 404, when it returns true
   * (it answered). The router passes the other services' /v1 paths through
   * and serves the web console's files with it; its own routes keep
   * precedence. Called after CORS and `shed`.
   */
  unrouted?: (req: NodeRequest, res: NodeResponse) => Promise<boolean>;
  /**
   * The process's metrics, shared by its listeners (default: a new
   * ServerMetrics of this server's own). Services add theirs to its registry.
   */
  metrics?: ServerMetrics;
  /**
   * METRICS_TOKEN: `GET /metrics` serves the metrics to callers presenting it
   * as a bearer token. Unset: /metrics is not served (routed like any path).
   */
  metricsToken?: string;
  /**
   * Descriptors of each listening socket that accept connections (default 1).
   * Node 20 accepts one connection per descriptor per event-loop turn, so on
   * a busy loop (turns of tens of milliseconds) a burst of new connections,
   * health probes among them, waits seconds in the kernel's listen queue;
   * `n` descriptors take up to `n` a turn. A short-lived helper process makes
   * the copies at listen (server/accept-handles.ts); if it fails, one
   * descriptor serves, with a warning.
   */
  acceptHandles?: number;
  /** Serve gRPC health and reflection (default true). */
  health?: boolean;
  reflection?: boolean;
}

/** Where a server listens (the URL is https:// on an internal TLS listener). */
export interface ListenResult {
  port: number;
  url: string;
  grpcPort?: number;
}

/** A server made by `createServer`. */
export interface Server {
  listen(): Promise<ListenResult>;
  close(): Promise<void>;
  health: HealthRegistry;
  logger: Logger;
  /** Its metrics registry and families (ServerOptions.metrics); a service registers its own metrics here. */
  metrics: ServerMetrics;
}
