import { mkdirSync } from "node:fs";
import pino from "pino";
import { ConfigError, loadConfig } from "./config.ts";
import { createAgentsServer } from "./server/create.ts";

// The agents service process: configuration from the environment (a missing
// or invalid setting exits naming it), then one port for everything.
let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`agents: ${err.message}`);
    process.exit(2);
  }
  throw err;
}

const logger = pino({ name: "agents", level: config.logLevel });
if (!config.databaseUrl) mkdirSync(config.dataDir, { recursive: true });
const service = await createAgentsServer(config, logger);
const { url } = await service.listen();
logger.info(
  { url, database: config.databaseUrl ? "postgres" : "pglite", providers: ["dev", config.anthropic && "anthropic", config.openai && "openai"].filter(Boolean) },
  "agents service listening",
);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    service.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
