import { setMaxListeners } from "node:events";
import { pino } from "pino";
import { CallValues } from "../calls/call-values.ts";
import { createDirectTransport } from "../calls/direct-transport.ts";
import { currentRequest, requestInfoKey } from "../context.ts";
import { envelopeOf } from "../envelope.ts";
import { createGrpcDirect } from "../grpc/grpc-direct.ts";
import { StreamRequest, StreamResponse } from "../grpc/stream-exchange.ts";
import { HealthRegistry, ServingStatus } from "../health/health.ts";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";
import { ShutdownHooks } from "../http/shutdown-hooks.ts";
import { METRICS_PATH, metricsEndpoint } from "../metrics/metrics-endpoint.ts";
import { routeLabeler } from "../metrics/route-label.ts";
import { ServerMetrics } from "../metrics/server-metrics.ts";
import { callerInterceptor } from "../tls/callers.ts";
import { flushTracing } from "../tracing/start.ts";
import { createRestHandler } from "../transcode/rest-handler.ts";
import { collectRoutes } from "../transcode/routes.ts";
import { callOutcomeInterceptor } from "./call-outcome.ts";
import { createConnectSide } from "./connect-router.ts";
import { createConnections } from "./connections.ts";
import { corsHandler } from "./cors.ts";
import { createDispatch } from "./dispatch.ts";
import { Inflight } from "./inflight.ts";
import { inputGuard } from "./input-guard.ts";
import { requestIdsMixin } from "./log-ids.ts";
import type { Server, ServerOptions } from "./options.ts";
import { requestInfoMaker } from "./request-info.ts";
import { createRequestEntry, requestInfoOf } from "./requests.ts";

/**
 * ServerOptions.shed as the request entry asks it, before dispatch: never
 * for what dispatch serves ahead of its shed step (the health endpoints,
 * /metrics and the documents on GET and HEAD) nor for procedure paths.
 */
function earlyShed(
  shed: NonNullable<ServerOptions["shed"]>,
  procedures: ReadonlyMap<string, unknown>,
  documents: readonly string[],
): NonNullable<ServerOptions["shed"]> {
  const served = new Set(["/livez", "/healthz", "/readyz", METRICS_PATH, ...documents]);
  return (req, path) =>
    procedures.has(path) || ((req.method === "GET" || req.method === "HEAD") && served.has(path))
      ? undefined
      : shed(req, path);
}

export type { ListenResult, Server, ServerOptions, ServiceRegistration } from "./options.ts";

/**
 * A server for Connect service implementations that also speaks REST: it
 * assembles the pieces (connections → request entry → dispatch → Connect's
 * handlers, the direct gRPC path or the REST transcoder, all calling the
 * implementations through the same interceptors) and owns listen and the
 * graceful close.
 */
export function createServer(options: ServerOptions): Server {
  const logger =
    options.logger ?? pino({ name: options.name, level: process.env.LOG_LEVEL ?? "info", mixin: requestIdsMixin });
  const bodyLimitBytes = options.bodyLimitBytes ?? 1024 * 1024;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const readHeaderTimeoutMs = options.readHeaderTimeoutMs ?? 5_000;
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 30_000;
  const envelope = envelopeOf(options.envelope);
  const health = new HealthRegistry();
  const shutdown = new AbortController();
  const restShutdown = new ShutdownHooks();
  // Every in-flight call listens on this one signal, so thousands of open
  // streams are expected, not a leak.
  setMaxListeners(0, shutdown.signal);
  const makeInfo = requestInfoMaker(logger);
  const metrics = options.metrics ?? new ServerMetrics();
  const inflight = new Inflight();
  metrics.attach(options.name, () => inflight.count);
  if (options.metricsToken) metrics.enableProcessMetrics();

  const internalTls = options.internal?.tls;
  const interceptors = [
    // Outermost: it converts errors, and counts and traces the status the caller gets.
    callOutcomeInterceptor(metrics, options.name, logger),
    // Who may call comes before what the call holds.
    ...(internalTls ? [callerInterceptor(options.internal!.callers)] : []),
    inputGuard(options.inputRefusal),
    ...(options.interceptors ?? []),
  ];
  const connect = createConnectSide({
    services: options.services,
    interceptors,
    bodyLimitBytes,
    shutdownSignal: shutdown.signal,
    health: options.health !== false ? health : undefined,
    reflection: options.reflection !== false,
    makeInfo,
  });

  // REST routes and plain gRPC calls reach the implementations in-process,
  // through the same interceptors, with the request's RequestInfo: the one
  // the entry made for the response they answer (an in-process call made
  // while serving a request: that request's, from the async path).
  const infoOf = (res: NodeResponse | undefined) => (res && requestInfoOf(res)) ?? currentRequest();
  const callValues = (res?: NodeResponse) =>
    new CallValues().set(requestInfoKey, infoOf(res) ?? makeInfo(undefined, undefined));
  const requestLogger = (res: NodeResponse) => infoOf(res)?.logger ?? logger;
  const routes = collectRoutes(options.services.map((s) => s.service));
  const labels = routeLabeler(routes, connect.byPath, Object.keys(options.documents ?? {}));
  const transport = createDirectTransport({
    services: connect.directServices,
    interceptors,
    contextValues: () => callValues(),
  });
  const grpcDirect = createGrpcDirect({
    services: connect.directServices.map((s) => s.service),
    transport,
    contextValues: callValues,
    bodyLimitBytes,
    requestTimeoutMs,
    shutdown: restShutdown,
    inflight,
    logger: (values) => values.get(requestInfoKey)?.logger ?? logger,
  });
  const rest = createRestHandler({
    routes,
    transport,
    contextValues: callValues,
    envelope,
    bodyLimitBytes,
    requestTimeoutMs: requestTimeoutMs > 0 ? requestTimeoutMs : undefined,
    streamTimeoutMs: options.streamTimeoutMs,
    ssePingMs: options.ssePingMs ?? 15_000,
    json: options.json ?? {},
    strictBody: options.strictBody ?? false,
    sseErrorEvent: options.sseErrorEvent,
    shutdown: restShutdown,
    logger: requestLogger,
    routed: labels.routed,
    sseOpened: (route) => metrics.sseOpened(options.name, route.template.source),
    sseClosed: (route) => metrics.sseClosed(options.name, route.template.source),
  });

  const connections = createConnections({
    onRequest: (req, res) => entry(req, res),
    readHeaderTimeoutMs,
    requestTimeoutMs,
    tls: internalTls,
    logger,
    acceptHandles: options.acceptHandles,
    refuseFirst: options.shed ? (socket, bytes) => entry.refuseFirst?.(socket, bytes) ?? false : undefined,
    // A plain gRPC call is served from its HTTP/2 stream, without Node's
    // compatibility objects, through the same entry as every request (ids,
    // trace, access log, metrics, in flight, dispatch). Public ports serve
    // no gRPC; an Expect header is the layer's to answer.
    takeStream: options.restOnly
      ? undefined
      : (stream, headers) => {
          if (headers.expect !== undefined) return false;
          if (!grpcDirect.match(headers[":method"], headers[":path"] ?? "", headers)) return false;
          // The entry and dispatch take them as the layer's pair: they carry what those use (stream-exchange.ts).
          entry(
            new StreamRequest(stream, headers) as unknown as NodeRequest,
            new StreamResponse(stream) as unknown as NodeResponse,
          );
          return true;
        },
  });
  const entry = createRequestEntry({
    logger,
    envelope,
    makeInfo,
    callerOf: (req) => connections.callerOf(req),
    inflight,
    observe: (req, res, seconds) =>
      metrics.observeHttp(
        options.name,
        req.method,
        labels.of(req),
        res.headersSent ? String(res.statusCode) : "none",
        seconds,
      ),
    observeHead: (head, status, seconds) =>
      metrics.observeHttp(options.name, head.method, labels.of(head), String(status), seconds),
    spanName: (req) => {
      const route = labels.of(req);
      return connect.byPath.has(route) ? route.slice(1) : `${req.method} ${route}`;
    },
    closing: () => connections.closing,
    closeIdle: () => connections.closeIdle(),
    asyncRequestContext: options.asyncRequestContext ?? true,
    shed: options.shed && earlyShed(options.shed, connect.byPath, Object.keys(options.documents ?? {})),
    dispatch: createDispatch({
      name: options.name,
      envelope,
      // Public ports only: an internal port has no browser callers.
      cors: options.cors || options.restOnly ? corsHandler(options.cors?.allowedOrigins ?? []) : undefined,
      readiness: options.readiness,
      documents: new Map(Object.entries(options.documents ?? {}).map(([p, d]) => [p, JSON.stringify(d)])),
      restOnly: options.restOnly ?? false,
      closing: () => connections.closing,
      requestTimeoutMs,
      native: connect.byPath,
      grpcDirect,
      rest,
      shed: options.shed,
      unrouted: options.unrouted && { serve: options.unrouted, routes },
      metrics: options.metricsToken ? metricsEndpoint(metrics, options.metricsToken, envelope) : undefined,
    }),
  });

  return {
    health,
    logger,
    metrics,
    async listen() {
      const host = options.host ?? "127.0.0.1";
      const port = await connections.listen(options.port ?? 0, host);
      const grpcPort = options.grpcPort !== undefined ? await connections.listen(options.grpcPort, host) : undefined;
      health.setServing("");
      for (const s of options.services) health.setServing(s.service.typeName);
      const shown = host.includes(":") ? `[${host}]` : host;
      if (options.internal && !internalTls) {
        logger.warn({ port, grpcPort }, "INTERNAL_TLS=off: this internal listener accepts any caller, without TLS");
      }
      logger.info({ port, grpcPort, tls: internalTls !== undefined }, `${options.name} listening`);
      return { port, url: `${internalTls ? "https" : "http"}://${shown}:${port}`, grpcPort };
    },
    async close() {
      if (connections.closing) return;
      health.setAll(ServingStatus.NOT_SERVING);
      connections.stopAccepting();
      const timeout = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
      await Promise.race([inflight.idle(), timeout(shutdownTimeoutMs)]);
      if (inflight.count > 0) {
        logger.warn({ active: inflight.count }, "shutdown timeout: cancelling in-flight requests");
        shutdown.abort();
        restShutdown.fire();
        await Promise.race([inflight.idle(), timeout(1000)]);
      }
      shutdown.abort();
      restShutdown.fire();
      await connections.destroyAll();
      // The spans of the last requests leave before the process does.
      await flushTracing();
    },
  };
}
