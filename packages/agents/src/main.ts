import { mkdirSync } from "node:fs";
import { listSettingsIfAsked } from "@platform/config";
import { internalTlsFromEnv, type ServiceTls, TlsSettingsError } from "@platform/rpc/settings";
import pino from "pino";
import { AGENTS_SETTINGS, ConfigError, loadConfig } from "./config.ts";

// The agents service process: configuration from the environment (a missing
// or invalid setting exits naming it), then the public REST/SSE port and the
// internal mutual-TLS gRPC port.
// `agents --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(AGENTS_SETTINGS);

let config: ReturnType<typeof loadConfig>;
let internalTls: ServiceTls | undefined;
try {
  config = loadConfig();
  internalTls = internalTlsFromEnv(process.env, "agents");
} catch (err) {
  if (err instanceof ConfigError || err instanceof TlsSettingsError) {
    console.error(`agents: ${err.message}`);
    process.exit(2);
  }
  throw err;
}

// The service itself is loaded only once its settings hold: `--settings` and a
// bad setting answer without it (under tsx, seconds of CPU less per such run).
const [{ requestIdsMixin, startTracing }, { createAgentsServer }] = await Promise.all([
  import("@platform/rpc"),
  import("./process.ts"),
]);
const logger = pino({ name: "agents", level: config.logLevel, mixin: requestIdsMixin });
await startTracing({ serviceName: "agents", endpoint: config.otelEndpoint });
if (!config.databaseUrl) mkdirSync(config.dataDir, { recursive: true });
const service = await createAgentsServer(config, logger, { internalTls });
// The signals are handled from here on: listen() serves REST before it has finished (the internal port,
// then the recovery of an earlier process's runs, a database round trip), and a SIGTERM in between
// must stop the service cleanly, not kill it by the signal's default action.
const listening = service.listen();
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    listening
      .then(
        () => service.close(),
        () => {},
      )
      .then(
        () => process.exit(0),
        (err) => {
          logger.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
  });
}
const { url, grpcUrl } = await listening;
logger.info(
  {
    url,
    grpcUrl,
    database: config.databaseUrl ? "postgres" : "pglite",
    providers: ["dev", config.anthropic && "anthropic", config.openai && "openai"].filter(Boolean),
  },
  "agents service listening",
);
