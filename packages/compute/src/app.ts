import * as fs from "node:fs";
import { join } from "node:path";
import { type Database, migrate, openDatabase } from "@platform/db";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import {
  type CallerPolicy,
  codeNameEnvelope,
  createServer,
  type Server,
  ServerMetrics,
  type ServiceTls,
} from "@platform/rpc";
import type { Logger } from "pino";
import type { ComputeConfig } from "./config.ts";
import type { SandboxDriver } from "./driver.ts";
import { buildDefaultImage, type DefaultImageBuild } from "./drivers/local/images/default-image.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { EgressProxy } from "./egress/proxy.ts";
import { createResolver } from "./egress/resolver.ts";
import { registerComputeMetrics } from "./metrics.ts";
import { computeServiceImpl } from "./server.ts";
import { ComputeDomain } from "./service/compute-domain.ts";
import { KyselyNetworkEventStore } from "./store/kysely-network-event-store.ts";
import { KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
import { MIGRATIONS_TABLE, migrations } from "./store/migrations.ts";
import type { NetworkEventStore } from "./store/network-event-store.ts";

export interface ComputeApp {
  domain: ComputeDomain;
  driver: SandboxDriver;
  database: Database<unknown>;
  server: Server;
  /** The default image's build in the background (COMPUTE_DEFAULT_IMAGE_PACKAGES), while one was started. */
  defaultImage?: DefaultImageBuild;
  /** Stops the GC routine, the server, the driver's watchers and the database (sandboxes keep running). */
  close(): Promise<void>;
}

export async function runMigrations(database: Database<unknown>): Promise<string[]> {
  return migrate(database, MIGRATIONS_TABLE, migrations);
}

/** Builds the driver named by the config. The Kubernetes one is loaded only when asked for. */
export async function createDriver(
  config: ComputeConfig,
  logger: Logger,
  egress?: EgressProxy,
  networkEvents?: NetworkEventStore,
): Promise<SandboxDriver> {
  if (config.driver === "local") {
    return new LocalDriver({
      dataDir: config.dataDir,
      pidsMax: config.pidsMax,
      logger,
      dieWithService: !config.keepSandboxesOnExit,
      defaultWorkspaceSize: config.pvcWorkspaceSize,
      releasePausedAfterMs: config.pauseReleaseMs,
      favorDynamicCgroupMods: config.favorDynamicCgroupMods,
      egress,
      defaultImage: config.sandboxImage,
      refuseUnknownImages: config.unknownImage === "refuse",
    });
  }
  const mod = (await import("./drivers/kubernetes/index.ts")) as {
    createKubernetesDriver?: (o: {
      config: ComputeConfig;
      logger: Logger;
      networkEvents?: NetworkEventStore;
    }) => Promise<SandboxDriver>;
  };
  if (!mod.createKubernetesDriver) throw new Error("the kubernetes driver does not export createKubernetesDriver");
  return mod.createKubernetesDriver({ config, logger, networkEvents });
}

/**
 * The agents service runs tool calls in sandboxes; the e2b service (E2B's API
 * over compute, issue 27) runs the e2b SDK's sandboxes for the organization
 * whose API key identity verified. The operator (buf curl at the console) may
 * list the methods by reflection and ask health, which any certificate of the
 * CA may, but not exec in a tenant's sandbox.
 *
 * The image store (issue 22) is the operator's: `platform images` imports,
 * builds and removes with the launcher's operator certificate (which still
 * cannot exec); agents and e2b may list the images (an agent's image is
 * checked against them).
 */
const OPERATOR_METHODS = new Set(["ImportImage", "DeleteImage", "BuildImage"]);
export const COMPUTE_CALLERS: CallerPolicy = {
  "compute.v1.ComputeService": Object.fromEntries(
    ComputeService.methods.map((m) => [
      m.name,
      OPERATOR_METHODS.has(m.name)
        ? ["operator"]
        : m.name === "ListImages"
          ? ["agents", "e2b", "operator"]
          : ["agents", "e2b"],
    ]),
  ),
};

/**
 * Wires store, driver, domain and the Connect server; does not listen.
 * `internalTls`: the port's mutual TLS (internalTlsFromEnv); undefined only
 * with INTERNAL_TLS=off.
 */
export async function createComputeApp(
  config: ComputeConfig,
  logger: Logger,
  overrides: { driver?: SandboxDriver; database?: Database<unknown>; internalTls: ServiceTls | undefined },
): Promise<ComputeApp> {
  fs.mkdirSync(config.dataDir, { recursive: true, mode: 0o711 });
  const database =
    overrides.database ??
    (await openDatabase<unknown>(
      config.databaseUrl ? { url: config.databaseUrl } : { dataDir: join(config.dataDir, "pglite") },
    ));
  await runMigrations(database);
  const networkEvents = new KyselyNetworkEventStore(database);
  // The egress proxy runs here, beside the local driver that wires sandboxes to it (a test's own driver brings its own).
  const egress =
    !overrides.driver && config.driver === "local"
      ? new EgressProxy({
          resolver: createResolver({ hosts: config.egressHosts, servers: config.egressDnsServers }),
          protectedPorts: config.egressProtectedPorts,
          events: networkEvents,
          spliceRelay: config.egressSpliceRelay,
          logger,
        })
      : undefined;
  const driver = overrides.driver ?? (await createDriver(config, logger, egress, networkEvents));
  const domain = new ComputeDomain({
    driver,
    store: new KyselySandboxStore(database),
    defaults: {
      image: config.sandboxImage,
      storageClass: config.pvcStorageClass,
      workspaceSize: config.pvcWorkspaceSize,
    },
    idlePauseMs: config.idlePauseMs,
    networkEvents,
    logger,
  });
  await domain.start();
  const metrics = new ServerMetrics();
  const server = createServer({
    name: "compute",
    services: [{ service: ComputeService, impl: computeServiceImpl(domain) }],
    // gRPC only (no REST route): an unrouted path is a 404 in the code-name envelope.
    envelope: codeNameEnvelope("compute"),
    port: config.port,
    host: config.host,
    internal: { tls: overrides.internalTls, callers: COMPUTE_CALLERS },
    // WriteFile carries up to 16 MiB of data plus framing.
    bodyLimitBytes: 17 * 1024 * 1024,
    logger,
    metrics,
    metricsToken: config.metricsToken,
    interceptors: [registerComputeMetrics(metrics.registry, database)],
  });
  // The default image on first use (issue 22), when this compute's own local driver can build it.
  const imageBuild =
    driver instanceof LocalDriver ? buildDefaultImage(driver.images, config.defaultImagePackages, logger) : undefined;
  const gcTimer = setInterval(() => {
    driver
      .collectGarbage(new Date())
      .then((ids) => ids.length > 0 && logger.info({ removed: ids }, "expired workspaces removed"))
      .catch((err) => logger.error({ err }, "workspace GC failed"));
  }, config.gcIntervalMs);
  gcTimer.unref();
  return {
    domain,
    driver,
    database,
    server,
    ...(imageBuild ? { defaultImage: imageBuild } : {}),
    async close() {
      clearInterval(gcTimer);
      await imageBuild?.stop();
      await server.close();
      await domain.stop();
      await driver.close();
      await egress?.close();
      if (!overrides.database) await database.close();
    },
  };
}
