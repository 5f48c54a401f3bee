// Identity service entry: settings from the environment, validated once;
// a missing or invalid one exits with status 2 naming it.

import { ConfigError, listSettingsIfAsked } from "@platform/config";
import { internalTlsFromEnv, type ServiceTls, TlsSettingsError } from "@platform/rpc/settings";
import { IDENTITY_SETTINGS, loadSettings } from "./config/settings.ts";

// `identity --settings`: the table of every setting (the README's), then exit.
listSettingsIfAsked(IDENTITY_SETTINGS);

let settings: ReturnType<typeof loadSettings>;
let internalTls: ServiceTls | undefined;
try {
  settings = loadSettings(process.env);
  internalTls = internalTlsFromEnv(process.env, "identity");
} catch (err) {
  if (err instanceof ConfigError || err instanceof TlsSettingsError) {
    process.stderr.write(`identity: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  throw err;
}

// The service itself is loaded only once its settings hold: `--settings` and a
// bad setting answer without it (under tsx, ~2.5 s of CPU less per such run).
const [{ startTracing }, { startApp }] = await Promise.all([import("@platform/rpc"), import("./app.ts")]);

// Before any server starts: every request gets its span (a no-op without an endpoint).
await startTracing({ serviceName: "identity", endpoint: settings.otelEndpoint });
const app = await startApp(settings, { internalTls }).catch((err: unknown) => {
  process.stderr.write(`identity: start-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
app.logger.info({ rest: app.urls.rest, grpc: app.urls.grpc, env: settings.env }, "identity ready");

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  app.logger.info({ signal }, "shutting down");
  app.close().then(
    () => process.exit(0),
    (err: unknown) => {
      app.logger.error({ err }, "shutdown failed");
      process.exit(1);
    },
  );
};
process.on("SIGTERM", () => stop("SIGTERM"));
process.on("SIGINT", () => stop("SIGINT"));
