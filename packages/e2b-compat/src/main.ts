import { listSettingsIfAsked } from "@platform/config";
import { internalTlsFromEnv, type ServiceTls, TlsSettingsError } from "@platform/rpc/settings";
import { pino } from "pino";
import { ConfigError, E2B_SETTINGS, loadConfig } from "./config.ts";

// `e2b --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(E2B_SETTINGS);

let config: ReturnType<typeof loadConfig>;
let tls: ServiceTls | undefined;
try {
  config = loadConfig();
  tls = internalTlsFromEnv(process.env, "e2b");
} catch (err) {
  if (err instanceof ConfigError || err instanceof TlsSettingsError) {
    console.error(`e2b: invalid configuration: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
// The service itself is loaded only once its settings hold: `--settings` and a
// bad setting answer without it (under tsx, seconds of CPU less per such run).
const { startE2bApp } = await import("./app.ts");
const logger = pino({ name: "e2b", level: config.logLevel });
const app = await startE2bApp(config, logger, tls);

const shutdown = async (signal: string) => {
  logger.info({ signal }, "shutting down; its running commands end, the sandboxes stay compute's");
  await app.close();
  process.exit(0);
};
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));
