// The four services in this process, each its real app on an ephemeral port
// over its own fresh database (PostgreSQL when the run has one, else PGlite):
// identity (public REST + internal gRPC listeners), compute with the local
// bubblewrap driver, agents (public REST + internal gRPC) wired to both, and
// the runtime router whose tenant workers are real worker servers started in
// this process. Other packages are reached by path as the bench does: the
// runtime package does not depend on them. Options leave compute out (for
// tests that run no tool), give agents its models and every public port
// the same extra settings.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { pino } from "pino";
import { loadConfig as loadAgentsConfig } from "../../../../agents/src/config.ts";
import { type AgentsServer, createAgentsServer } from "../../../../agents/src/process.ts";
import type { ProviderRegistry } from "../../../../agents/src/providers/registry.ts";
import { type ComputeApp, createComputeApp } from "../../../../compute/src/app.ts";
import { LocalDriver } from "../../../../compute/src/drivers/local/local-driver.ts";
import { KyselySandboxStore } from "../../../../compute/src/store/kysely-sandbox-store.ts";
import { testComputeConfig } from "../../../../compute/src/testing/config.ts";
import { startTestServer, type TestServer } from "../../../../identity/src/testing/server.ts";
import { IdentityClient } from "@platform/identity-client";
import { type RouterOptions, type RunningRouter, startRouter } from "../../router/router.ts";
import { InProcessOrchestrator } from "../../testing/in-process-orchestrator.ts";

export interface StackOptions {
  /** Start compute (default true); without it agents' compute URL leads nowhere (no tool can run). */
  compute?: boolean;
  /** The agents service's models (default: its configuration's, i.e. dev/). */
  providers?: ProviderRegistry;
  /** Extra settings of identity and agents (their environment), e.g. CORS_ALLOWED_ORIGINS. */
  env?: Record<string, string>;
  /** Extra router options. */
  router?: Partial<RouterOptions>;
}

export interface Stack {
  identity: TestServer;
  /** Undefined with `compute: false`. */
  compute: ComputeApp | undefined;
  computeUrl: string;
  agents: AgentsServer;
  /** The public REST/SSE port. */
  agentsUrl: string;
  /** The internal gRPC port (plaintext here: INTERNAL_TLS=off). */
  agentsGrpcUrl: string;
  orchestrator: InProcessOrchestrator;
  router: RunningRouter;
  /** Every service database, for the "nothing stored" scan. */
  databases: Record<"identity" | "agents", Database<unknown>> & { compute?: Database<unknown> };
  /** A gRPC transport to an internal `url`; JSON codec unless `binary` (only JSON can carry a lone surrogate). */
  transport(url: string, binary: boolean): Transport;
  close(): Promise<void>;
}

const logger = pino({ level: process.env.HOSTILE_LOG ?? "silent" });

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const closers: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    // INTERNAL_TLS=off: this test throws hostile input at every surface, not at the mTLS layer
    // (an allow-list refusal would hide what the handlers do with the input).
    const identity = await startTestServer({ LOG_LEVEL: "error", INTERNAL_TLS: "off", ...options.env });
    closers.push(() => identity.close());

    const dataDir = mkdtempSync(join(tmpdir(), "hostile-input-"));
    // Sandboxes run as their own uids and must traverse the path to their workspace.
    chmodSync(dataDir, 0o711);
    closers.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    let compute: ComputeApp | undefined;
    let computeDb: Database<unknown> | undefined;
    // Nothing listens there: a tool call fails as UNAVAILABLE.
    let computeUrl = "http://127.0.0.1:9";
    if (options.compute !== false) {
      const db = await createTestDatabase<unknown>();
      computeDb = db;
      closers.push(() => db.close());
      const cgroupPrefix = `platform-hostile-${process.pid}`;
      const driver = new LocalDriver({
        dataDir,
        killGraceMs: 500,
        pidsMax: 128,
        cgroupPrefix,
        logger,
        dieWithService: true,
      });
      const app = await createComputeApp(
        testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }),
        logger,
        {
          driver,
          database: db,
          internalTls: undefined,
        },
      );
      closers.push(async () => {
        await app.close();
        // Whatever a call created: no sandbox outlives the test.
        const cleaner = new LocalDriver({ dataDir, cgroupPrefix, logger, dieWithService: true });
        for (const r of await new KyselySandboxStore(db).listLive()) {
          await cleaner.destroy(r.id).catch(() => {});
        }
        await cleaner.close();
      });
      computeUrl = (await app.server.listen()).url;
      compute = app;
    }

    const agentsDb = await createTestDatabase<unknown>();
    closers.push(() => agentsDb.close());
    const agentsConfig = loadAgentsConfig({
      HOST: "127.0.0.1",
      AGENTS_PORT: "0",
      AGENTS_GRPC_PORT: "0",
      IDENTITY_GRPC_URL: identity.grpcUrl,
      COMPUTE_GRPC_URL: computeUrl,
      ...(agentsDb.url ? { DATABASE_URL: agentsDb.url } : { AGENTS_DATA_DIR: join(dataDir, "agents") }),
      LOG_LEVEL: "silent",
      ...options.env,
    });
    const agents = await createAgentsServer(agentsConfig, logger, {
      database: agentsDb as never,
      internalTls: undefined,
      providers: options.providers,
    });
    closers.push(() => agents.close());
    const { url: agentsUrl, grpcUrl: agentsGrpcUrl } = await agents.listen();

    const orchestrator = new InProcessOrchestrator(agentsGrpcUrl);
    const router = await startRouter({
      auth: new IdentityClient(createGrpcTransport({ baseUrl: identity.grpcUrl })),
      orchestrator,
      sweeps: false,
      logger,
      ...options.router,
    });
    closers.push(async () => {
      await router.close();
      for (const d of await orchestrator.listDeployments({})) await orchestrator.deleteDeployment(d.name);
    });
    return {
      identity,
      compute,
      computeUrl,
      agents,
      agentsUrl,
      agentsGrpcUrl,
      orchestrator,
      router,
      databases: { identity: identity.database as never, agents: agentsDb, ...(computeDb && { compute: computeDb }) },
      transport: (url, binary) => createGrpcTransport({ baseUrl: url, useBinaryFormat: binary }),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
