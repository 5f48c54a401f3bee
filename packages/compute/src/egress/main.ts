// The egress proxy's process (Kubernetes: the egress-proxy Deployment).
import { lookup } from "node:dns/promises";
import { listSettingsIfAsked } from "@platform/config";
import { pino } from "pino";
import { ConfigError } from "../config.ts";
import { canonicalAddress } from "./addresses.ts";
import { EGRESS_PROXY_SETTINGS, loadEgressProxyConfig } from "./config.ts";
import { createResolver } from "./resolver.ts";

listSettingsIfAsked(EGRESS_PROXY_SETTINGS);

let config: ReturnType<typeof loadEgressProxyConfig>;
try {
  config = loadEgressProxyConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`egress-proxy: invalid configuration: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
// The proxy itself is loaded only once its settings hold: `--settings` and a bad setting answer without it.
const [{ openDatabase }, { KyselyNetworkEventStore }, { KyselySandboxStore }, { startEgressService }] =
  await Promise.all([
    import("@platform/db"),
    import("../store/kysely-network-event-store.ts"),
    import("../store/kysely-sandbox-store.ts"),
    import("./service.ts"),
  ]);
const logger = pino({ name: "egress-proxy", level: config.logLevel });
// compute owns the schema (it runs the migrations); the proxy only reads records and appends events.
const database = await openDatabase<unknown>({ url: config.databaseUrl });
// The proxy's own NetworkPolicy must let it reach the database; no sandbox may, whatever its policy lists.
const dbHost = new URL(config.databaseUrl).hostname.replace(/^\[|\]$/g, "");
const deniedAddresses = (await lookup(dbHost, { all: true }).catch(() => [])).map((a) => canonicalAddress(a.address));
const service = await startEgressService({
  host: config.host,
  port: config.port,
  key: config.key,
  sandboxes: new KyselySandboxStore(database),
  events: new KyselyNetworkEventStore(database),
  resolver: createResolver({ hosts: config.egressHosts, servers: config.egressDnsServers }),
  protectedPorts: config.egressProtectedPorts,
  deniedAddresses,
  spliceRelay: config.egressSpliceRelay,
  logger,
});
logger.info({ host: config.host, port: service.port }, "egress proxy listening");

const shutdown = async (signal: string) => {
  logger.info({ signal }, "shutting down");
  await service.close();
  await database.close();
  process.exit(0);
};
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));
