import type { ServiceImpl, Transport } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import { createServer, createServiceTransport, type ServiceTls } from "@platform/rpc";
import { type Logger, pino } from "pino";
import type { AgentsPort } from "./agents-port.ts";
import { ConnectAgentsClient } from "./agents-client.ts";
import { WORKER_CALLERS, type WorkerConfig } from "./config.ts";
import { workerInvoke } from "./invoke.ts";

/**
 * A worker's transport to agents, whether it started with its tenant or was
 * a spare that opened the connection before (./warm-up.ts): the reply's
 * events are read without Connect's client pipeline (rpc direct-stream.ts).
 */
export function agentsTransport(url: string, tls: ServiceTls | undefined): Transport {
  return createServiceTransport({
    baseUrl: url,
    tls,
    expectServer: "agents",
    direct: [SessionService.method.sendMessages, SessionService.method.streamEvents],
  });
}

export interface RunningServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

/**
 * Starts the tenant worker's server: RuntimeService.Invoke over gRPC (and
 * Connect), gRPC health SERVING for runtime.v1.RuntimeService once listening.
 * With `config.tls` the port speaks mutual TLS only and admits RuntimeService
 * calls from `callers` (default: the router's certificate); agents is called
 * with the same certificate.
 */
export async function startWorker(
  config: Omit<WorkerConfig, "exitWithStdin" | "logLevel">,
  options: { logger?: Logger; agents?: AgentsPort; shutdownTimeoutMs?: number; callers?: readonly string[] } = {},
): Promise<RunningServer> {
  const logger = options.logger ?? pino({ level: "silent" });
  const agents = options.agents ?? new ConnectAgentsClient(agentsTransport(config.agentsUrl, config.tls));
  const impl: ServiceImpl<typeof RuntimeService> = {
    invoke: workerInvoke({ tenantId: config.tenantId, orgId: config.orgId, agents, logger }),
  };
  const server = createServer({
    name: "runtime-worker",
    services: [{ service: RuntimeService, impl }],
    envelope: "runtime",
    port: config.port,
    host: config.host,
    internal: { tls: config.tls, callers: { [RuntimeService.typeName]: options.callers ?? WORKER_CALLERS } },
    logger,
    metricsToken: config.metricsToken,
    // The local orchestrator sends SIGKILL 5 s after SIGTERM.
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 4000,
  });
  const { port, url } = await server.listen();
  return { port, url, close: () => server.close() };
}
