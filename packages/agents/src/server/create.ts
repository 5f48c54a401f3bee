import { create } from "@bufbuild/protobuf";
import { type Database, openDatabase } from "@platform/db";
import { SessionEventSchema } from "@platform/gen/agents/v1/agents_pb";
import { createServer, type Server } from "@platform/rpc";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import type { Logger } from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { IdentityAuthenticator } from "../adapters/identity.ts";
import { type AgentsApp, createAgentsApp } from "../app.ts";
import type { AgentsConfig } from "../config.ts";
import type { AgentsDB } from "../db/schema.ts";
import { AnthropicProvider } from "../providers/anthropic.ts";
import { DevModel } from "../providers/dev.ts";
import { OpenAIProvider } from "../providers/openai.ts";
import { ProviderRegistry } from "../providers/registry.ts";

/** `dev/` always; `anthropic/` and `openai/` when configured. */
export function providersFrom(config: Pick<AgentsConfig, "anthropic" | "openai">): ProviderRegistry {
  const registry = new ProviderRegistry().register("dev", new DevModel());
  if (config.anthropic) registry.register("anthropic", new AnthropicProvider(config.anthropic));
  if (config.openai) registry.register("openai", new OpenAIProvider(config.openai));
  return registry;
}

export type AgentsServer = {
  app: AgentsApp;
  server: Server;
  database: Database<AgentsDB>;
  listen(): Promise<{ port: number; url: string }>;
  /** Stops accepting, ends local runs with their terminal events, closes the database. */
  close(): Promise<void>;
};

/**
 * The agents service on one port (REST + SSE, Connect, gRPC-Web, gRPC; health
 * endpoints): database, identity and compute clients, providers, server.
 */
export async function createAgentsServer(
  config: AgentsConfig,
  logger: Logger,
  overrides: { providers?: ProviderRegistry; database?: Database<AgentsDB>; pollMs?: number } = {},
): Promise<AgentsServer> {
  const database = overrides.database ?? (await openDatabase<AgentsDB>({ url: config.databaseUrl, dataDir: config.databaseUrl ? undefined : config.dataDir }));
  const app = await createAgentsApp({
    database,
    logger,
    authenticator: new IdentityAuthenticator(grpcTransport(config.identityGrpcUrl)),
    sandboxes: new ComputeSandboxes(grpcTransport(config.computeGrpcUrl)),
    providers: overrides.providers ?? providersFrom(config),
    toolTimeoutMs: config.toolTimeoutMs,
    toolOutputLimitBytes: config.toolOutputLimitBytes,
    maxModelCalls: config.maxModelCalls,
    maxTokens: config.maxTokens,
    runLeaseMs: config.runLeaseMs,
    pollMs: overrides.pollMs,
    listenUrl: config.databaseUrl,
  });
  const server = createServer({
    name: "agents",
    envelope: "agents",
    services: app.services,
    interceptors: app.interceptors,
    readiness: () => app.ready(),
    port: config.port,
    host: config.host,
    logger,
    // REST bodies carry every field (`items: []`, `systemPrompt: ""`); SSE
    // events still omit zero and empty fields, as the contract says.
    // A page's `next` is null when there are no more pages (spec: Page).
    json: { alwaysEmitImplicit: true, emitNulls: true },
    // A stream that fails after it started ends with the contract's error event.
    sseErrorEvent: (err) => create(SessionEventSchema, { type: "error", content: err.message }),
  });
  return {
    app,
    server,
    database,
    listen: () => server.listen(),
    async close() {
      await app.stop();
      await server.close();
      if (!overrides.database) await database.close();
    },
  };
}
