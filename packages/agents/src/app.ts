import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Interceptor } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { migrate } from "@platform/db";
import { Code, PlatformError } from "@platform/errors";
import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";
import { ScheduleService } from "@platform/gen/agents/v1/schedules_pb";
import type { Logger } from "pino";
import { PgEventListener } from "./adapters/pg-listener.ts";
import { KyselyIdleSandboxStore } from "./db/idle-sandbox-store.ts";
import { KyselyStore } from "./db/kysely-store.ts";
import { KyselyScheduleStore } from "./db/schedule-store.ts";
import { MIGRATIONS_TABLE, migrations } from "./db/migrations.ts";
import type { AgentsDB } from "./db/schema.ts";
import { KyselyUsageStore } from "./db/usage-store.ts";
import { AgentsDomain } from "./domain/agents.ts";
import { IdleSandboxSweeper } from "./domain/idle-sandboxes.ts";
import type { Authenticator, Sandboxes, WorkspaceFiles } from "./domain/ports.ts";
import { Scheduler } from "./domain/scheduler.ts";
import { Schedules } from "./domain/schedules.ts";
import { SessionFiles } from "./domain/session-files.ts";
import type { Store } from "./domain/store.ts";
import { UsageDomain } from "./domain/usage.ts";
import type { ProviderRegistry } from "./providers/registry.ts";
import { Followers } from "./runs/follow.ts";
import { EventHub } from "./runs/hub.ts";
import { Reaper } from "./runs/reaper.ts";
import { Runner } from "./runs/runner.ts";
import { authInterceptor } from "./server/auth.ts";
import { scheduleService } from "./server/schedules.ts";
import { agentService, sessionService } from "./server/services.ts";
import { usageService } from "./server/usage-service.ts";
import { HeaderSecrets } from "./tools/mcp/secrets.ts";
import { Toolbox } from "./tools/toolbox.ts";

export type AgentsAppOptions = {
  database: Database<AgentsDB>;
  authenticator: Authenticator;
  sandboxes: Sandboxes;
  /** The workspace files of sandboxes (users' uploads and downloads); absent: the file RPCs answer unimplemented. */
  workspaceFiles?: WorkspaceFiles;
  providers: ProviderRegistry;
  logger: Logger;
  toolTimeoutMs?: number;
  toolOutputLimitBytes?: number;
  maxModelCalls?: number;
  maxTokens?: number;
  /** AGENTS_SECRETS_KEY (32 bytes): seals MCP servers' header values; absent: servers with headers are refused. */
  secretsKey?: Buffer;
  /** AGENTS_MCP_ALLOW_PRIVATE_TARGETS: MCP servers on loopback and private addresses may be called. */
  mcpAllowPrivateTargets?: boolean;
  runLeaseMs?: number;
  /** How often a followed session's state is re-read while another replica runs it (one read per session). */
  pollMs?: number;
  /** How often this replica looks for runs whose lease lapsed (their process died); default a sixth of the lease, at most 5 s. */
  sweepMs?: number;
  /**
   * A name that stays the same when this replica restarts (the process
   * `main.ts` starts: host and public port), so that at its start it ends
   * the runs its previous process left, without waiting for their leases.
   */
  replicaName?: string;
  /** This process is the only one using the database (embedded PGlite): at its start every run left is dead. */
  soleProcess?: boolean;
  /** How long a send waits for the database to store its messages before answering 503. */
  storePatienceMs?: number;
  /** Tests: wraps the store (e.g. one that fails like an unreachable database, where the database cannot be stopped). */
  decorateStore?: (store: Store) => Store;
  /**
   * postgres:// URL to LISTEN on for other replicas' appends, so their
   * followers wake at once instead of at the next poll. Absent (PGlite,
   * one process): the in-process hub is enough.
   */
  listenUrl?: string;
  /**
   * Destroy the sandbox of a session idle (no run, no new event) this long
   * (domain/idle-sandboxes.ts); absent or 0: sandboxes are kept.
   */
  sandboxIdleMs?: number;
  /** The schedules' clock (tests move it); default the system clock. */
  clock?: () => Date;
  /** How often the schedule ticker looks for due slots; default 1000; 0: only on `scheduler.tick()` (tests). */
  scheduleTickMs?: number;
  /** How late a slot may fire as on time (older: missed, see catch_up); default 60000. */
  scheduleGraceMs?: number;
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
  const kysely = new KyselyStore(options.database.db, origin, options.database.run);
  const store = options.decorateStore?.(kysely) ?? kysely;
  const hub = new EventHub();
  const listener = options.listenUrl
    ? new PgEventListener(options.listenUrl, origin, (id) => hub.changed(id), options.logger)
    : undefined;
  await listener?.start();
  const toolbox = new Toolbox({
    timeoutMs: options.toolTimeoutMs ?? 120_000,
    outputLimitBytes: options.toolOutputLimitBytes ?? 16 * 1024,
  });
  const secrets = new HeaderSecrets(options.secretsKey);
  const replicaName = (options.replicaName ?? hostname()).replaceAll("#", "_");
  const owner = `${replicaName}#${randomUUID()}`;
  const leaseMs = options.runLeaseMs ?? 30_000;
  const usageStore = new KyselyUsageStore(options.database.db);
  const usage = new UsageDomain(usageStore);
  const runner = new Runner(
    store,
    hub,
    options.providers,
    toolbox,
    options.sandboxes,
    {
      leaseMs,
      maxModelCalls: options.maxModelCalls ?? 25,
      maxTokens: options.maxTokens ?? 4096,
      owner,
      storePatienceMs: options.storePatienceMs,
      mcp: {
        secrets,
        callTimeoutMs: options.toolTimeoutMs ?? 120_000,
        connectTimeoutMs: Math.min(options.toolTimeoutMs ?? 120_000, 10_000),
        outputLimitBytes: options.toolOutputLimitBytes ?? 16 * 1024,
        allowPrivateTargets: options.mcpAllowPrivateTargets ?? false,
      },
      usage: usageStore,
    },
    options.logger,
  );
  const sweepMs = options.sweepMs ?? Math.min(5000, Math.max(50, Math.floor(leaseMs / 6)));
  const reaper = new Reaper(
    store,
    hub,
    (runId) => runner.isLocal(runId),
    // A dead run's session is free once it is ended: its queued sends go on.
    { intervalMs: sweepMs, onEnded: (run) => void runner.dispatch(run.orgId, run.sessionId) },
    options.logger,
  );
  runner.useReaper(reaper);
  reaper.start();
  // Queued sends whose dispatch was lost (a crash between a run's end and the next start).
  const queueSweep = setInterval(() => {
    runner.dispatchIdle().catch((err) => options.logger.warn({ err }, "could not sweep the queued sends"));
  }, sweepMs);
  queueSweep.unref();
  const domain = new AgentsDomain(
    store,
    runner,
    new Followers(store, hub, options.pollMs ?? 1000, reaper, (orgId, sessionId) => runner.dispatch(orgId, sessionId)),
    options.sandboxes,
    options.providers,
    options.secretsKey ? secrets : undefined,
  );
  const interceptors: Interceptor[] = [authInterceptor(options.authenticator)];
  const idleSandboxes = options.sandboxIdleMs
    ? new IdleSandboxSweeper(
        new KyselyIdleSandboxStore(options.database.db),
        options.sandboxes,
        { idleMs: options.sandboxIdleMs },
        options.logger,
      )
    : undefined;
  idleSandboxes?.start();
  const clock = options.clock ?? (() => new Date());
  const scheduleStore = new KyselyScheduleStore(options.database.db);
  const schedules = new Schedules(scheduleStore, store, clock);
  const scheduler = new Scheduler(
    scheduleStore,
    store,
    runner,
    clock,
    { intervalMs: options.scheduleTickMs ?? 1000, graceMs: options.scheduleGraceMs ?? 60_000, batch: 20 },
    options.logger.child({ component: "scheduler" }),
  );
  scheduler.start();
  return {
    store,
    runner,
    domain,
    scheduler,
    interceptors,
    services: [
      { service: AgentService, impl: agentService(domain) },
      {
        service: SessionService,
        impl: sessionService(
          domain,
          new SessionFiles(store, options.sandboxes, options.workspaceFiles ?? noWorkspaceFiles),
          usage,
        ),
      },
      { service: UsageService, impl: usageService(usage) },
      { service: ScheduleService, impl: scheduleService(schedules) },
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
    /**
     * Ends the runs this replica's previous process (or, for the sole
     * process of a database, any earlier process) left holding sessions:
     * call once the service listens, so no earlier process of it still runs.
     * Returns how many it ended.
     */
    async recover(): Promise<number> {
      const ended = await reaper.sweep(
        options.soleProcess
          ? { sole: true, self: owner }
          : options.replicaName
            ? { replica: replicaName, self: owner }
            : { lapsed: true },
      );
      // Sends queued before the restart start now (their sessions are free).
      await runner.dispatchIdle().catch((err) => options.logger.warn({ err }, "could not start the queued sends"));
      return ended;
    },
    /** Ends local runs (each gets its terminal event) before the database closes. */
    async stop(): Promise<void> {
      await scheduler.stop();
      await idleSandboxes?.stop();
      clearInterval(queueSweep);
      reaper.stop();
      await runner.stop();
      kysely.stopNotifying();
      await listener?.stop();
    },
  };
}

export type AgentsApp = Awaited<ReturnType<typeof createAgentsApp>>;

/** For apps built without compute's file calls (tests of other parts). */
const noWorkspaceFiles: WorkspaceFiles = {
  list: () => Promise.reject(unimplemented()),
  read: () => Promise.reject(unimplemented()),
  write: () => Promise.reject(unimplemented()),
};

function unimplemented(): PlatformError {
  return new PlatformError(Code.Unimplemented, "unimplemented", "workspace files are not available in this service");
}
