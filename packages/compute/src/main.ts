import { listSettingsIfAsked } from "@platform/config";
import { internalTlsFromEnv, type ServiceTls, TlsSettingsError } from "@platform/rpc/settings";
import { pino } from "pino";
import { COMPUTE_SETTINGS, ConfigError, loadConfig } from "./config.ts";

// `compute --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(COMPUTE_SETTINGS);

let config: ReturnType<typeof loadConfig>;
let internalTls: ServiceTls | undefined;
try {
  config = loadConfig();
  internalTls = internalTlsFromEnv(process.env, "compute");
} catch (err) {
  if (err instanceof ConfigError || err instanceof TlsSettingsError) {
    console.error(`compute: invalid configuration: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
// The service itself is loaded only once its settings hold: `--settings` and a
// bad setting answer without it (under tsx, seconds of CPU less per such run).
const [{ requestIdsMixin, startTracing }, { createComputeApp }] = await Promise.all([
  import("@platform/rpc"),
  import("./app.ts"),
]);
const logger = pino({ name: "compute", level: config.logLevel, mixin: requestIdsMixin });
await startTracing({ serviceName: "compute", endpoint: config.otelEndpoint });

let app: Awaited<ReturnType<typeof createComputeApp>>;
try {
  app = await createComputeApp(config, logger, { internalTls });
} catch (err) {
  // e.g. the local driver without root or without writable cgroups, or an unreachable DATABASE_URL.
  logger.fatal({ err }, "compute failed to start");
  console.error(`compute: failed to start: ${(err as Error).message}`);
  process.exit(1);
}
const { port, url } = await app.server.listen();
logger.info(
  { port, url, driver: app.driver.name, dataDir: config.dataDir, database: app.database.kind },
  "compute listening",
);

const shutdown = async (signal: string) => {
  logger.info({ signal }, "shutting down; sandboxes keep running and are re-attached on the next start");
  await app.close();
  process.exit(0);
};
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));
