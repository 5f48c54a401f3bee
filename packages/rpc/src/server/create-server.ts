import { setMaxListeners } from "node:events";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type * as tls from "node:tls";
import type { DescMethodServerStreaming, DescService, Message } from "@bufbuild/protobuf";
import {
  type ConnectRouter,
  createConnectRouter,
  createContextValues,
  type Interceptor,
  type ServiceImpl,
} from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { PlatformError } from "@platform/errors";
import { Health } from "@platform/gen/grpc/health/v1/health_pb";
import * as reflectionV1Pb from "@platform/gen/grpc/reflection/v1/reflection_pb";
import * as reflectionV1alphaPb from "@platform/gen/grpc/reflection/v1alpha/reflection_pb";
import { type Logger, pino } from "pino";
import {
  acceptOrGenerateRequestId,
  acceptOrGenerateTraceId,
  currentRequest,
  type RequestInfo,
  requestInfoKey,
  runWithRequest,
} from "../context.ts";
import { type Envelope, type EnvelopeName, envelopeOf } from "../envelope.ts";
import { HealthRegistry, healthService, ServingStatus } from "../health/health.ts";
import { HTTP2_STREAM_WINDOW, widenConnectionWindow } from "../http2-windows.ts";
import { Reflector, reflectionV1, reflectionV1alpha } from "../reflection/reflection.ts";
import type { OutputJsonOptions } from "../transcode/json.ts";
import { createRestHandler, type NodeRequest, type NodeResponse } from "../transcode/rest-handler.ts";
import { collectRoutes } from "../transcode/routes.ts";
import { boundStatusHeaders } from "../error-bounds.ts";
import { type CallerPolicy, callerInterceptor } from "../tls/callers.ts";
import { createTlsListener } from "../tls/listener.ts";
import type { ServiceTls } from "../tls/service-tls.ts";
import { createDirectTransport } from "./direct-transport.ts";
import { createGrpcDirect } from "./grpc-direct.ts";
import { type InputRefusal, inputGuard } from "./input-guard.ts";
import { errorInterceptor } from "./interceptors.ts";
import { PLATFORM_VERSION } from "./version.ts";
import { headerOf } from "./node-request.ts";
import { ShutdownHooks } from "./shutdown-hooks.ts";

/** A service and its (possibly partial) Connect implementation. */
export interface ServiceRegistration<S extends DescService = DescService> {
  service: S;
  // biome-ignore lint/suspicious/noExplicitAny: each registration has its own service type
  impl: Partial<ServiceImpl<any>>;
}

export interface ServerOptions {
  /** Service name for logs (e.g. "identity"). */
  name: string;
  services: ServiceRegistration[];
  /** REST error body format. */
  envelope: EnvelopeName | Envelope;
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
  /** Serve gRPC health and reflection (default true). */
  health?: boolean;
  reflection?: boolean;
}

export interface ListenResult {
  port: number;
  url: string;
  grpcPort?: number;
}

export interface Server {
  listen(): Promise<ListenResult>;
  close(): Promise<void>;
  health: HealthRegistry;
  logger: Logger;
}

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export function createServer(options: ServerOptions): Server {
  const logger = options.logger ?? pino({ name: options.name, level: process.env.LOG_LEVEL ?? "info" });
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

  const internalTls = options.internal?.tls;
  const routerInterceptors = [
    errorInterceptor(logger),
    // Who may call comes before what the call holds.
    ...(internalTls ? [callerInterceptor(options.internal!.callers)] : []),
    inputGuard(options.inputRefusal),
    ...(options.interceptors ?? []),
  ];
  const router: ConnectRouter = createConnectRouter({
    interceptors: routerInterceptors,
    readMaxBytes: bodyLimitBytes,
    shutdownSignal: shutdown.signal,
    // What connectNodeAdapter accepts by default; gRPC clients may compress.
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  const serviceNames: string[] = [];
  for (const { service, impl } of options.services) {
    router.service(service, impl as never);
    serviceNames.push(service.typeName);
  }
  const files = options.services.map((s) => s.service.file);
  // What REST routes and plain gRPC calls reach without Connect's handler.
  const directServices: ServiceRegistration[] = [...options.services];
  if (options.health !== false) {
    const impl = healthService(health);
    router.service(Health, impl);
    directServices.push({ service: Health, impl });
    serviceNames.push(Health.typeName);
    files.push(Health.file);
  }
  if (options.reflection !== false) {
    const names = [
      ...serviceNames,
      reflectionV1Pb.ServerReflection.typeName,
      reflectionV1alphaPb.ServerReflection.typeName,
    ];
    const reflector = new Reflector(
      [...files, reflectionV1Pb.ServerReflection.file, reflectionV1alphaPb.ServerReflection.file],
      names,
    );
    router.service(reflectionV1Pb.ServerReflection, reflectionV1(reflector));
    router.service(reflectionV1alphaPb.ServerReflection, reflectionV1alpha(reflector));
  }

  // Every call, whether it came from the network or from the REST
  // transcoder, carries the RequestInfo as a context value.
  const wrap = (h: UniversalHandler): UniversalHandler =>
    Object.assign(
      (req: Parameters<UniversalHandler>[0]) => {
        const info = currentRequest() ?? makeInfo(req.header.get("x-request-id"), req.header.get("x-trace-id"));
        const contextValues = req.contextValues ?? createContextValues();
        contextValues.set(requestInfoKey, info);
        return h({ ...req, contextValues });
      },
      {
        requestPath: h.requestPath,
        protocolNames: h.protocolNames,
        allowedMethods: h.allowedMethods,
        supportedContentType: h.supportedContentType,
        service: h.service,
        method: h.method,
      },
    );
  const handlers = router.handlers.map(wrap);
  const byPath = new Map(handlers.map((h) => [h.requestPath, h]));

  const makeInfo = (rid: string | null | undefined, tid: string | null | undefined, caller?: string): RequestInfo => {
    const requestId = acceptOrGenerateRequestId(rid);
    const traceId = acceptOrGenerateTraceId(tid);
    // Made on first use: most requests log only their closing line, which
    // does not need it, and an open stream should not hold one.
    let child: Logger | undefined;
    return {
      requestId,
      traceId,
      caller,
      get logger() {
        child ??= logger.child({ requestId, traceId });
        return child;
      },
    };
  };

  const transport = createDirectTransport({
    services: directServices,
    interceptors: routerInterceptors,
    contextValues: () => {
      const values = createContextValues();
      values.set(requestInfoKey, currentRequest() ?? makeInfo(undefined, undefined));
      return values;
    },
  });

  const grpcDirect = createGrpcDirect({
    services: directServices.map((s) => s.service),
    transport,
    bodyLimitBytes,
    requestTimeoutMs,
    shutdown: restShutdown,
  });

  const rest = createRestHandler({
    routes: collectRoutes(options.services.map((s) => s.service)),
    transport,
    envelope,
    bodyLimitBytes,
    requestTimeoutMs: requestTimeoutMs > 0 ? requestTimeoutMs : undefined,
    streamTimeoutMs: options.streamTimeoutMs,
    ssePingMs: options.ssePingMs ?? 15_000,
    json: options.json ?? {},
    strictBody: options.strictBody ?? false,
    sseErrorEvent: options.sseErrorEvent,
    shutdown: restShutdown,
    logger: () => currentRequest()?.logger ?? logger,
  });

  let closing = false;
  let active = 0;
  let idleWaiters: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();

  const sendJson = (res: NodeResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };

  const serveNative = async (handler: UniversalHandler, req: NodeRequest, res: NodeResponse) => {
    const ureq = universalRequestFromNodeRequest(req, res, undefined, undefined);
    if (handler.method.methodKind === "unary" && requestTimeoutMs > 0) {
      // REQUEST_TIMEOUT for calls that bring no deadline of their own.
      const ct = ureq.header.get("content-type") ?? "";
      if (ct.startsWith("application/grpc")) {
        if (!ureq.header.has("grpc-timeout")) ureq.header.set("grpc-timeout", `${requestTimeoutMs}m`);
      } else if (!ureq.header.has("connect-timeout-ms")) {
        ureq.header.set("connect-timeout-ms", String(requestTimeoutMs));
      }
    }
    const ures = await handler(ureq);
    // Connect writes the status when the body ends; its own protocol errors
    // never met the error interceptor, so their grpc-message is bounded here.
    await universalResponseToNodeResponse(
      {
        status: ures.status,
        body: ures.body,
        get header() {
          return ures.header && boundStatusHeaders(ures.header);
        },
        get trailer() {
          return ures.trailer && boundStatusHeaders(ures.trailer);
        },
      },
      res,
    );
  };

  const onRequest = (req: NodeRequest, res: NodeResponse) => {
    const started = performance.now();
    active++;
    const info = makeInfo(headerOf(req, "x-request-id"), headerOf(req, "x-trace-id"), tlsListener?.callerOf(req));
    info.remoteAddress = req.socket?.remoteAddress;
    req.headers["x-request-id"] = info.requestId;
    req.headers["x-trace-id"] = info.traceId;
    res.setHeader("x-request-id", info.requestId);
    res.setHeader("x-trace-id", info.traceId);
    if (closing && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    res.once("close", () => {
      active--;
      const probe = req.url === "/livez" || req.url === "/healthz" || req.url === "/readyz";
      logger[probe ? "debug" : "info"](
        {
          requestId: info.requestId,
          traceId: info.traceId,
          method: req.method,
          path: (req.url ?? "").split("?")[0],
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
        },
        "request",
      );
      // Keep-alive connections must not outlive a shutdown once they are idle.
      if (closing) h1.closeIdleConnections();
      if (active === 0) {
        for (const w of idleWaiters) w();
        idleWaiters = [];
      }
    });
    runWithRequest(info, () => {
      handle(req, res).catch((err) => {
        info.logger.error({ err }, "request failed");
        if (!res.headersSent) sendJson(res, 500, envelope.render(PlatformError.internal()).body);
        else res.destroy();
      });
    });
  };

  const handle = async (req: NodeRequest, res: NodeResponse) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (req.method === "GET" || req.method === "HEAD") {
      if (path === "/livez" || path === "/healthz") return sendJson(res, 200, { status: "ok", service: options.name, version: PLATFORM_VERSION });
      if (path === "/readyz") {
        let ok = !closing;
        if (ok && options.readiness) ok = await options.readiness().catch(() => false);
        return sendJson(res, ok ? 200 : 503, { status: ok ? "ready" : "not_ready", service: options.name, version: PLATFORM_VERSION });
      }
    }
    if (options.restOnly) {
      // Public ports carry REST/SSE only: a procedure path (gRPC, Connect,
      // gRPC-Web, health, reflection) is not found here.
      if (byPath.has(path)) {
        return sendJson(res, 404, envelope.render(PlatformError.notFound("not served on this port")).body);
      }
      return rest(req, res);
    }
    if (req.httpVersionMajor === 2) {
      const direct = grpcDirect.match(req as http2.Http2ServerRequest, path);
      if (direct) return grpcDirect.serve(direct, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    }
    const native = byPath.get(path);
    if (native) return serveNative(native, req, res);
    return rest(req, res);
  };

  const h1 = http.createServer(
    {
      headersTimeout: readHeaderTimeoutMs,
      // Receiving the whole request (headers and body) must also end within
      // the request deadline: a trickled body cannot hold a socket forever.
      requestTimeout: requestTimeoutMs > 0 ? Math.max(requestTimeoutMs, readHeaderTimeoutMs) : 0,
      connectionsCheckingInterval: Math.min(1000, readHeaderTimeoutMs),
    },
    onRequest,
  );
  // Node starts its header/request timeout checks when an http.Server emits
  // "listening"; this one never listens itself (sockets are handed over), so
  // start them explicitly.
  h1.emit("listening");
  const h2 = http2.createServer({ settings: { initialWindowSize: HTTP2_STREAM_WINDOW } }, onRequest);
  h2.on("session", (s) => {
    sessions.add(s);
    widenConnectionWindow(s);
    // READ_HEADER_TIMEOUT for HTTP/2: a connection must open its first
    // stream in time (later idle periods are the client's business).
    const t = setTimeout(() => s.destroy(), readHeaderTimeoutMs);
    s.once("stream", () => clearTimeout(t));
    s.once("close", () => {
      clearTimeout(t);
      sessions.delete(s);
    });
  });

  // HTTP/1.1 and h2c on one port: Node's plaintext http2 server ignores
  // allowHTTP1, so peek at the first bytes for the HTTP/2 preface.
  const onConnection = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    if (closing) {
      socket.destroy();
      return;
    }
    dispatch(socket);
  };
  // A TLS connection says its protocol by ALPN; a plaintext one (or TLS
  // without ALPN) by its first bytes.
  const dispatch = (socket: net.Socket | tls.TLSSocket) => {
    const alpn = (socket as tls.TLSSocket).alpnProtocol;
    if (alpn === "h2") return void h2.emit("connection", socket);
    if (alpn === "http/1.1") return void h1.emit("connection", socket);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), readHeaderTimeoutMs);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const n = Math.min(buf.length, H2_PREFACE.length);
      const isPrefix = buf.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isPrefix && buf.length < H2_PREFACE.length) return;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.pause();
      socket.unshift(buf);
      // The http2 session drains the socket's buffered bytes itself; the
      // HTTP/1.1 parser needs the stream flowing again.
      if (isPrefix) h2.emit("connection", socket);
      else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  };

  const tlsListener = internalTls
    ? createTlsListener({
        tls: internalTls,
        handshakeTimeoutMs: readHeaderTimeoutMs,
        track: (socket) => {
          sockets.add(socket);
          socket.once("close", () => sockets.delete(socket));
          if (closing) socket.destroy();
        },
        dispatch: (socket) => dispatch(socket),
        logger,
      })
    : undefined;

  const netServers: net.Server[] = [];
  const listenOn = (port: number, host: string) =>
    new Promise<number>((resolve, reject) => {
      const s: net.Server = tlsListener ? tlsListener.createServer() : net.createServer(onConnection);
      s.once("error", reject);
      s.listen(port, host, () => {
        netServers.push(s);
        resolve((s.address() as net.AddressInfo).port);
      });
    });

  return {
    health,
    logger,
    async listen() {
      const host = options.host ?? "127.0.0.1";
      const port = await listenOn(options.port ?? 0, host);
      const grpcPort = options.grpcPort !== undefined ? await listenOn(options.grpcPort, host) : undefined;
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
      if (closing) return;
      closing = true;
      health.setAll(ServingStatus.NOT_SERVING);
      for (const s of netServers) s.close();
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
      const idle = () =>
        active === 0 ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r));
      const timeout = (ms: number) =>
        new Promise<void>((r) => setTimeout(r, ms).unref());
      await Promise.race([idle(), timeout(shutdownTimeoutMs)]);
      if (active > 0) {
        logger.warn({ active }, "shutdown timeout: cancelling in-flight requests");
        shutdown.abort();
        restShutdown.fire();
        await Promise.race([idle(), timeout(1000)]);
      }
      shutdown.abort();
      restShutdown.fire();
      h1.closeAllConnections();
      h1.close(() => {});
      for (const s of sockets) s.destroy();
      await Promise.all(netServers.map((s) => new Promise((r) => s.close(() => r(undefined)))));
    },
  };
}


