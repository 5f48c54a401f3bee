import { randomUUID } from "node:crypto";
import type { Interceptor } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { migrate } from "@platform/db";
import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import type { Logger } from "pino";
import { PgEventListener } from "./adapters/pg-listener.ts";
import { KyselyStore } from "./db/kysely-store.ts";
import { MIGRATIONS_TABLE, migrations } from "./db/migrations.ts";
import type { AgentsDB } from "./db/schema.ts";
import { AgentsDomain } from "./domain/agents.ts";
import type { Authenticator, Sandboxes } from "./domain/ports.ts";
import type { ProviderRegistry } from "./providers/registry.ts";
import { Followers } from "./runs/follow.ts";
import { EventHub } from "./runs/hub.ts";
import { Runner } from "./runs/runner.ts";
import { authInterceptor } from "./server/auth.ts";
import { agentService, sessionService } from "./server/services.ts";
import { Toolbox } from "./tools/toolbox.ts";

export type AgentsAppOptions = {
  database: Database<AgentsDB>;
  authenticator: Authenticator;
  sandboxes: Sandboxes;
  providers: ProviderRegistry;
  logger: Logger;
  toolTimeoutMs?: number;
  toolOutputLimitBytes?: number;
  maxModelCalls?: number;
  maxTokens?: number;
  runLeaseMs?: number;
  /** How often a followed session's state is re-read while another replica runs it (one read per session). */
  pollMs?: number;
  /** How long a run's published event may wait to be stored (batched with the ones after it). */
  flushMs?: number;
  /**
   * postgres:// URL to LISTEN on for other replicas' appends, so their
   * followers wake at once instead of at the next poll. Absent (PGlite,
   * one process): the in-process hub is enough.
   */
  listenUrl?: string;
};

/**
 * Everything the agents service is, minus the network listener: the domain
 * over its adapters, the Connect service implementations, the auth
 * interceptor and the readiness probe. main.ts hands these to the server;
 * tests mount them on an in-process router.
 */
export async function createAgentsApp(options: AgentsAppOptions) {
  await migrate(options.database as Database<unknown>, MIGRATIONS_TABLE, migrations);
  const origin = randomUUID();
  const store = new KyselyStore(options.database.db, origin);
  const hub = new EventHub();
  const listener = options.listenUrl ? new PgEventListener(options.listenUrl, origin, (id) => hub.changed(id), options.logger) : undefined;
  await listener?.start();
  const toolbox = new Toolbox(options.sandboxes, {
    timeoutMs: options.toolTimeoutMs ?? 120_000,
    outputLimitBytes: options.toolOutputLimitBytes ?? 16 * 1024,
  });
  const runner = new Runner(
    store,
    hub,
    options.providers,
    toolbox,
    options.sandboxes,
    {
      leaseMs: options.runLeaseMs ?? 30_000,
      maxModelCalls: options.maxModelCalls ?? 25,
      maxTokens: options.maxTokens ?? 4096,
      flushMs: options.flushMs ?? 50,
    },
    options.logger,
  );
  const domain = new AgentsDomain(store, runner, new Followers(store, hub, options.pollMs ?? 1000), options.sandboxes);
  const interceptors: Interceptor[] = [authInterceptor(options.authenticator)];
  return {
    store,
    runner,
    domain,
    interceptors,
    services: [
      { service: AgentService, impl: agentService(domain) },
      { service: SessionService, impl: sessionService(domain) },
    ],
    /** Ready when the database answers and identity's gRPC is reachable. */
    async ready(): Promise<boolean> {
      const [db, identity] = await Promise.all([
        store.ping().then(
          () => true,
          () => false,
        ),
        options.authenticator.reachable(),
      ]);
      return db && identity;
    },
    /** Ends local runs (each gets its terminal event) before the database closes. */
    async stop(): Promise<void> {
      await runner.stop();
      await listener?.stop();
    },
  };
}

export type AgentsApp = Awaited<ReturnType<typeof createAgentsApp>>;
