// Tenant worker process: `node --import tsx packages/runtime/src/worker/main.ts`
// (or the bundle the local orchestrator builds of it) with TENANT_ID, ORG_ID,
// AGENTS_GRPC_URL, PORT (default 50051), TLS_CA_FILE/TLS_CERT_FILE/TLS_KEY_FILE
// (the runtime-worker certificate; INTERNAL_TLS=off for development only);
// as a spare, the deployment's settings arrive on the IPC channel (./supervisor.ts).

import { ConfigError, listSettingsIfAsked } from "@platform/config";
import { requestIdsMixin, startTracing } from "@platform/rpc";
import { type Logger, pino } from "pino";
import { internalTls, internalUrl, type ServiceTls } from "../config/tls.ts";
import { exitsWithStdin, WORKER_SETTINGS, WORKER_TLS_NAME, workerConfig } from "./config.ts";
import { adoption, isSpare, reportReady } from "./supervisor.ts";
import { type ConnectedAgents, connectAgents, warmUp } from "./warm-up.ts";
import { type RunningServer, startWorker } from "./worker.ts";

// `worker --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(WORKER_SETTINGS);

let server: RunningServer | undefined;
let logger: Logger | undefined;
let stopping = false;
async function stop(reason: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger?.info({ reason }, "tenant worker stopping");
  const force = setTimeout(() => process.exit(1), 5000);
  force.unref();
  await server?.close();
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
// Watched from the start: a spare waiting for a tenant must not outlive its router either.
if (exitsWithStdin(process.env)) {
  process.stdin.on("end", () => void stop("parent gone"));
  process.stdin.on("error", () => void stop("parent gone"));
  process.stdin.resume();
}

// No top-level await: the bundle is CommonJS, which V8 can code-cache (./orchestrator/local/worker-bundle.ts).
async function serve(): Promise<void> {
  // A spare does now what a tenant's first request would otherwise wait for.
  let early: ConnectedAgents | undefined;
  if (isSpare()) {
    // The certificate and the agents URL are common to every worker; when a
    // setting is missing or wrong the adopted worker reports it below.
    let tls: ServiceTls | undefined;
    let agentsUrl: string | undefined;
    try {
      tls = internalTls(process.env, WORKER_TLS_NAME);
      // The orchestrator gives a spare the host it will serve on (HOST) before any tenant's settings.
      await warmUp(tls, process.env.HOST || undefined);
      agentsUrl = internalUrl(process.env, "AGENTS_GRPC_URL", tls !== undefined);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
    }
    if (agentsUrl) early = await connectAgents(agentsUrl, tls);
  }
  await adoption();
  let config: ReturnType<typeof workerConfig>;
  try {
    config = workerConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`runtime worker: ${err.message}`);
    process.exit(2);
  }

  logger = pino({
    name: "runtime-worker",
    level: config.logLevel,
    base: { tenantId: config.tenantId },
    mixin: requestIdsMixin,
  });
  await startTracing({ serviceName: "runtime-worker", endpoint: config.otelEndpoint });
  server = await startWorker(config, { logger, agents: early?.url === config.agentsUrl ? early.agents : undefined });
  logger.info({ port: server.port }, "tenant worker serving");
  reportReady(server.port);
}

serve().catch((err) => {
  console.error(err);
  process.exit(1);
});
