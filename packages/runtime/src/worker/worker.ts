import { createGrpcTransport } from "@connectrpc/connect-node";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import type { Logger } from "pino";
import { type RunningServer, startGrpcServer } from "../server/grpc-server.ts";
import type { AgentsPort } from "./agents-port.ts";
import { ConnectAgentsClient } from "./agents-client.ts";
import type { WorkerConfig } from "./config.ts";
import { workerInvoke } from "./invoke.ts";

/** Starts the tenant worker's gRPC server (RuntimeService + health). */
export async function startWorker(
  config: Omit<WorkerConfig, "exitWithStdin" | "logLevel">,
  options: { logger?: Logger; agents?: AgentsPort } = {},
): Promise<RunningServer> {
  const agents = options.agents ?? new ConnectAgentsClient(createGrpcTransport({ baseUrl: config.agentsUrl }));
  return startGrpcServer({
    serviceNames: [RuntimeService.typeName],
    routes(router) {
      router.service(RuntimeService, {
        invoke: workerInvoke({ tenantId: config.tenantId, orgId: config.orgId, agents, logger: options.logger }),
      });
    },
    port: config.port,
    host: config.host,
  });
}
