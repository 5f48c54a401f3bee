// The runtime router: `node --import tsx packages/runtime/src/router/main.ts`.
// Settings: `--settings` lists them (declared in ./config.ts).
import { resolve } from "node:path";
import { ConfigError, listSettingsIfAsked } from "@platform/config";
import { pino } from "pino";
import type { Orchestrator } from "../orchestrator/orchestrator.ts";
import { ROUTER_LISTING, type RouterConfig, routerConfig } from "./config.ts";

// `router --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(ROUTER_LISTING);

let config: RouterConfig;
try {
  config = routerConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`runtime router: ${err.message}`);
    process.exit(2);
  }
  throw err;
}

// The service itself is loaded only once its settings hold: `--settings` and a
// bad setting answer without it (under tsx, seconds of CPU less per such run).
const [
  { createServiceTransport, requestIdsMixin, startTracing },
  { LocalOrchestrator },
  { IdentityClient },
  { startRouter },
] = await Promise.all([
  import("@platform/rpc"),
  import("../orchestrator/local/local-orchestrator.ts"),
  import("@platform/identity-client"),
  import("./router.ts"),
]);
const logger = pino({ name: "runtime-router", level: config.logLevel, mixin: requestIdsMixin });
await startTracing({ serviceName: "runtime-router", endpoint: config.otelEndpoint });

/**
 * The OpenTelemetry SDK's own settings (OTEL_BSP_* and the like, read by the
 * SDK) reach the workers as they reach the router; the endpoint as the router read it.
 */
function tracingEnv(c: RouterConfig): Record<string, string> {
  return {
    ...Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith("OTEL_") && !!e[1]),
    ),
    ...(c.otelEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: c.otelEndpoint } : {}),
  };
}

async function orchestrator(c: RouterConfig): Promise<Orchestrator> {
  if (c.orchestrator === "local") {
    return LocalOrchestrator.open({
      dataDir: resolve(c.dataDir),
      host: c.workerHost,
      workerEnv: {
        AGENTS_GRPC_URL: c.agentsUrl,
        LOG_LEVEL: c.logLevel,
        ...(c.tls ? {} : { INTERNAL_TLS: "off" }),
        ...tracingEnv(c),
        ...(c.metricsToken ? { METRICS_TOKEN: c.metricsToken } : {}),
      },
      tls: c.tls && c.workerTlsFiles && { client: c.tls, workerFiles: c.workerTlsFiles },
      // Scale-up blocks at most the cold-start wait; the router's reachability
      // wait shares the same budget (see TenantWaker).
      scaleWaitMs: c.coldStartWaitMs,
      spareWorker: c.spareWorker,
      logger,
    });
  }
  // Loaded only in the cluster shape: the embedded shape never needs the client library.
  const k8s = await import("../orchestrator/kubernetes/index.ts");
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  return new k8s.KubernetesOrchestrator({
    kubeConfig,
    namespace: c.namespace,
    template: k8s.loadWorkerTemplate(c.workerTemplatePath),
    internalTls: c.tls !== undefined,
    // METRICS_TOKEN reaches cluster workers from a Secret (the template's secretEnv), not as a value in their Deployments.
    workerEnv: tracingEnv(c),
  });
}

if (!config.tls) logger.warn("INTERNAL_TLS=off: identity and the tenant workers are called without TLS");
const auth = new IdentityClient(
  createServiceTransport({ baseUrl: config.identityUrl, tls: config.tls, expectServer: "identity" }),
);
const router = await startRouter({
  auth,
  tls: config.tls,
  orchestrator: await orchestrator(config),
  port: config.port,
  host: config.host,
  logger,
  maxWaitersPerTenant: config.maxWaitersPerTenant,
  reachTimeoutMs: config.coldStartWaitMs,
  readiness: () => auth.reachable(),
  corsAllowedOrigins: config.corsAllowedOrigins,
  metricsToken: config.metricsToken,
  passThrough: { identity: config.identityRestUrl, agents: config.agentsRestUrl },
  consoleDir: resolve(config.consoleDir),
});
logger.info({ url: router.url, orchestrator: config.orchestrator }, "runtime router ready");

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, "runtime router stopping");
  await router.close();
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
