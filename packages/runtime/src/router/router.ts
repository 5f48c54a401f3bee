import type { ServiceImpl } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import openApi from "@platform/gen/openapi/router.json" with { type: "json" };
import { createServer, type NodeRequest, type NodeResponse, ServerMetrics, type ServiceTls } from "@platform/rpc";
import { type Logger, pino } from "pino";
import { Controller } from "../controller/controller.ts";
import { startSweeps } from "../controller/sweeps.ts";
import { waitServing } from "../health/grpc-health.ts";
import type { Orchestrator } from "../orchestrator/orchestrator.ts";
import type { Authenticator } from "./authenticator.ts";
import { consoleFiles } from "./console-files.ts";
import { routerInvoke } from "./invoke.ts";
import { type PassThroughTargets, passThrough } from "./pass-through.ts";
import { coldStartRecorder, registerWakerMetrics } from "./metrics.ts";
import { GrpcTenantWorkers, type TenantWorkers } from "./tenant-workers.ts";
import { TenantWaker } from "./waker.ts";

export interface RouterOptions {
  auth: Authenticator;
  orchestrator: Orchestrator;
  port?: number;
  host?: string;
  logger?: Logger;
  /** Cold-start wait (spec: 10 s). */
  reachTimeoutMs?: number;
  maxWaitersPerTenant?: number;
  /** Run IdleSweep and WeeklySweep on their schedules (default true). */
  sweeps?: boolean;
  controller?: Controller;
  workers?: TenantWorkers;
  /**
   * The router's certificate: tenant workers are called over mutual TLS with
   * it (for the default `workers`). Undefined: plaintext (INTERNAL_TLS=off).
   */
  tls?: ServiceTls;
  /** /readyz: e.g. whether identity answers. */
  readiness?: () => Promise<boolean>;
  shutdownTimeoutMs?: number;
  /** Origins whose pages may call the router (CORS_ALLOWED_ORIGINS); default none. */
  corsAllowedOrigins?: readonly string[];
  /** METRICS_TOKEN: GET /metrics with this bearer token; not served when absent. */
  metricsToken?: string;
  /** The public services whose /v1 paths the router passes through (one origin for the console). */
  passThrough?: PassThroughTargets;
  /** The web console's built files, served at `/` (when the directory holds index.html). */
  consoleDir?: string;
}

export interface RunningRouter {
  url: string;
  port: number;
  controller: Controller;
  waker: TenantWaker;
  close(): Promise<void>;
}

/**
 * The public router: RuntimeService.Invoke as REST/SSE (plus /livez, /healthz,
 * /readyz) on its port. The port is public, so it serves no gRPC, Connect,
 * gRPC-Web, health or reflection: the internal surfaces are the workers'.
 */
export async function startRouter(options: RouterOptions): Promise<RunningRouter> {
  const logger = options.logger ?? pino({ level: "silent" });
  const controller = options.controller ?? new Controller({ orchestrator: options.orchestrator, logger });
  const workers = options.workers ?? new GrpcTenantWorkers(options.tls);
  const sessions = workers instanceof GrpcTenantWorkers ? workers : undefined;
  const metrics = new ServerMetrics();
  const waker = new TenantWaker({
    controller,
    waitReachable: (url, ms) => waitServing(url, ms, { transport: sessions?.transport(url), tls: options.tls }),
    reachTimeoutMs: options.reachTimeoutMs,
    maxWaitersPerTenant: options.maxWaitersPerTenant,
    onColdStart: coldStartRecorder(metrics.registry),
  });
  registerWakerMetrics(metrics.registry, waker);
  const impl: ServiceImpl<typeof RuntimeService> = {
    invoke: routerInvoke({
      auth: options.auth,
      waker,
      workers,
      controller,
      logger,
    }),
  };
  // The router's own routes, health and documents come first (createServer's `unrouted`); then the
  // other services' /v1 paths, then the console's files.
  const forward = options.passThrough ? passThrough(options.passThrough, logger) : undefined;
  const files = options.consoleDir ? consoleFiles(options.consoleDir) : undefined;
  const unrouted =
    forward || files
      ? async (req: NodeRequest, res: NodeResponse) =>
          ((await forward?.(req, res)) ?? false) || ((await files?.(req, res)) ?? false)
      : undefined;
  const server = createServer({
    name: "runtime-router",
    services: [{ service: RuntimeService, impl }],
    envelope: "runtime",
    restOnly: true,
    // Public: it describes the route and holds no secret (THREAT_MODEL.md).
    documents: { "/openapi.json": openApi },
    cors: { allowedOrigins: options.corsAllowedOrigins ?? [] },
    port: options.port,
    host: options.host,
    logger,
    readiness: options.readiness,
    shutdownTimeoutMs: options.shutdownTimeoutMs,
    metrics,
    metricsToken: options.metricsToken,
    unrouted,
  });
  const sweeps = options.sweeps === false ? undefined : startSweeps(controller, { logger });
  const { url, port } = await server.listen();
  return {
    url,
    port,
    controller,
    waker,
    async close() {
      sweeps?.stop();
      await server.close();
      await options.orchestrator.close?.();
    },
  };
}
