import { hostname } from "node:os";
import { create } from "@bufbuild/protobuf";
import { type Database, openDatabase } from "@platform/db";
import { SessionEventSchema } from "@platform/gen/agents/v1/agents_pb";
import openApi from "@platform/gen/openapi/agents.json" with { type: "json" };
import { WebhookPublisher } from "@platform/identity-client";
import { type CallerPolicy, createServer, type Server, type ServerOptions, type ServiceTls } from "@platform/rpc";
import type { Logger } from "pino";
import { ComputeSandboxes } from "./adapters/compute.ts";
import { ComputeWorkspaceFiles } from "./adapters/compute-files.ts";
import { computeTransport, grpcTransport } from "./adapters/grpc-transport.ts";
import { IdentityAuthenticator } from "./adapters/identity.ts";
import { type AgentsApp, createAgentsApp } from "./app.ts";
import type { AgentsConfig } from "./config.ts";
import type { AgentsDB } from "./db/schema.ts";
import { registerAgentsMetrics } from "./metrics.ts";
import { AnthropicProvider } from "./providers/anthropic.ts";
import { DevModel } from "./providers/dev.ts";
import { OpenAIProvider } from "./providers/openai.ts";
import { ProviderRegistry } from "./providers/registry.ts";
import { WebhookRelay } from "./webhooks/relay.ts";

/** `dev/` always; `anthropic/` and `openai/` when configured (else the setting that would is named). */
export function providersFrom(config: Pick<AgentsConfig, "anthropic" | "openai">): ProviderRegistry {
  const registry = new ProviderRegistry().register("dev", new DevModel());
  if (config.anthropic) registry.register("anthropic", new AnthropicProvider(config.anthropic));
  else registry.unconfigured("anthropic", "ANTHROPIC_API_KEY");
  if (config.openai) registry.register("openai", new OpenAIProvider(config.openai));
  else registry.unconfigured("openai", "OPENAI_BASE_URL (or OPENAI_API_KEY for api.openai.com)");
  return registry;
}

/**
 * Who may call the agents RPCs on the internal port: the runtime's tenant
 * workers (design.md), and the operator at the console. Every call still
 * needs a caller's bearer credential (the auth interceptor), so the
 * certificate adds a second check, never a bypass.
 */
export const AGENTS_CALLERS: CallerPolicy = {
  "agents.v1.AgentService": ["runtime-worker", "operator"],
  "agents.v1.SessionService": ["runtime-worker", "operator"],
  "agents.v1.ScheduleService": ["runtime-worker", "operator"],
};

export type AgentsServer = {
  app: AgentsApp;
  /** The public port (AGENTS_PORT): REST and SSE only. */
  server: Server;
  /** The internal port (AGENTS_GRPC_PORT): gRPC, Connect, gRPC-Web over mutual TLS. */
  grpc: Server;
  database: Database<AgentsDB>;
  listen(): Promise<{ port: number; url: string; grpcPort: number; grpcUrl: string }>;
  /** Stops accepting, ends local runs with their terminal events, closes the database. */
  close(): Promise<void>;
};

/**
 * The agents service on two ports: AGENTS_PORT (public) REST + SSE and the
 * health endpoints; AGENTS_GRPC_PORT (internal) gRPC, Connect, gRPC-Web with
 * health and reflection, mutual TLS with `internalTls` (undefined only with
 * INTERNAL_TLS=off), which is also the client certificate of its calls to
 * identity and compute. The specification: "It exposes no public gRPC server".
 */
export async function createAgentsServer(
  config: AgentsConfig,
  logger: Logger,
  overrides: {
    providers?: ProviderRegistry;
    database?: Database<AgentsDB>;
    pollMs?: number;
    /** The schedules' clock and tick (tests); see AgentsAppOptions. */
    clock?: () => Date;
    scheduleTickMs?: number;
    /** How often the webhook relay looks for events to hand to identity (default 1 s). */
    webhookRelayMs?: number;
    internalTls: ServiceTls | undefined;
  },
): Promise<AgentsServer> {
  const tls = overrides.internalTls;
  const database =
    overrides.database ??
    (await openDatabase<AgentsDB>({
      url: config.databaseUrl,
      dataDir: config.databaseUrl ? undefined : config.dataDir,
    }));
  // The file calls and ExecCommand skip Connect's client (grpc-transport.ts).
  const toCompute = computeTransport(config.computeGrpcUrl, tls);
  const identityTransport = grpcTransport(config.identityGrpcUrl, tls, "identity");
  const app = await createAgentsApp({
    database,
    logger,
    authenticator: new IdentityAuthenticator(identityTransport),
    sandboxes: new ComputeSandboxes(toCompute, { maxRuntimeMs: config.sandboxMaxRuntimeMs }),
    workspaceFiles: new ComputeWorkspaceFiles(toCompute),
    providers: overrides.providers ?? providersFrom(config),
    toolTimeoutMs: config.toolTimeoutMs,
    toolOutputLimitBytes: config.toolOutputLimitBytes,
    maxModelCalls: config.maxModelCalls,
    maxTokens: config.maxTokens,
    secretsKey: config.secretsKey,
    mcpAllowPrivateTargets: config.mcpAllowPrivateTargets,
    runLeaseMs: config.runLeaseMs,
    sandboxIdleMs: config.sandboxIdleMs,
    pollMs: overrides.pollMs,
    clock: overrides.clock,
    scheduleTickMs: overrides.scheduleTickMs,
    listenUrl: config.databaseUrl,
    // The same host and public port after a restart: the same replica, whose
    // earlier process's runs are dead once this one listens.
    replicaName: config.port ? `${hostname()}:${config.port}` : undefined,
    soleProcess: !config.databaseUrl && !overrides.database,
  });
  const common: ServerOptions = {
    name: "agents",
    envelope: "agents",
    services: app.services,
    interceptors: app.interceptors,
    readiness: () => app.ready(),
    host: config.host,
    logger,
    // REST bodies carry every field (`items: []`, `systemPrompt: ""`); SSE
    // events still omit zero and empty fields, as the contract says.
    // A page's `next` is null when there are no more pages (spec: Page).
    json: { alwaysEmitImplicit: true, emitNulls: true },
    // A stream that fails after it started ends with the contract's error event.
    sseErrorEvent: (err) => create(SessionEventSchema, { type: "error", content: err.message }),
    metricsToken: config.metricsToken,
  };
  const server = createServer({
    ...common,
    port: config.port,
    restOnly: true,
    // Public: it describes the routes and holds no secret (THREAT_MODEL.md).
    documents: { "/openapi.json": openApi },
    cors: { allowedOrigins: config.corsAllowedOrigins ?? [] },
    // Clients' connection bursts, and the liveness probes that arrive behind
    // them, are accepted up to 16 a loop turn rather than one: under the
    // mixed-load bench figure a probe's new connection otherwise waited up to
    // 5 s in the listen queue of a loop whose turns took 30-80 ms.
    acceptHandles: 16,
  });
  const grpc = createServer({
    ...common,
    name: "agents-grpc",
    port: config.grpcPort,
    internal: { tls, callers: AGENTS_CALLERS },
    logger: logger.child({ listener: "grpc" }),
    // One process, one registry: both ports show all of it.
    metrics: server.metrics,
  });
  // Session events to organizations' webhooks, through identity (issue 25).
  const relay = new WebhookRelay(
    database.db,
    new WebhookPublisher(identityTransport),
    logger.child({ part: "webhook-relay" }),
    {
      intervalMs: overrides.webhookRelayMs,
    },
  );
  registerAgentsMetrics(server.metrics.registry, database, (runId) => app.runner.isLocal(runId));
  return {
    app,
    server,
    grpc,
    database,
    async listen() {
      const pub = await server.listen();
      let internal: Awaited<ReturnType<Server["listen"]>>;
      try {
        internal = await grpc.listen();
      } catch (err) {
        await server.close();
        throw err;
      }
      // Listening proves no earlier process of this replica runs: its runs are dead.
      const ended = await app.recover().catch((err) => {
        logger.warn({ err }, "could not end the runs of an earlier process; their leases will lapse");
        return 0;
      });
      if (ended > 0) logger.warn({ runs: ended }, "ended the runs an earlier process left unfinished");
      relay.start();
      return { port: pub.port, url: pub.url, grpcPort: internal.port, grpcUrl: internal.url };
    },
    async close() {
      await relay.stop();
      await app.stop();
      await Promise.all([server.close(), grpc.close()]);
      if (!overrides.database) await database.close();
    },
  };
}
