import { host, logLevel, port, readSettings, url } from "@platform/config";
import { COMPUTE_SETTINGS } from "../config.ts";
import { proxyKeyFile } from "./key-setting.ts";

/**
 * The egress proxy's own process (Kubernetes: its Deployment). It shares
 * compute's database (policies read, events written) and the key of the
 * sandboxes' proxy credentials; the resolver and protected-port settings are
 * compute's own rows (one meaning for both).
 */
export const EGRESS_PROXY_SETTINGS = {
  port: port("EGRESS_PROXY_PORT", {
    default: 3128,
    doc: "the proxy's TCP port (HTTP CONNECT/forward and SOCKS5, told apart by the first byte); every connection names its sandbox with the credential in its proxy URL",
  }),
  host: host(),
  databaseUrl: url("DATABASE_URL", {
    protocols: ["postgres:", "postgresql:"],
    secret: true,
    required: true,
    doc: "compute's database: each connection reads its sandbox's policy there (so UpdateNetworkPolicy applies to the next one) and the events and byte counts are written there for ListNetworkEvents and usage",
  }),
  keyFile: proxyKeyFile("EGRESS_PROXY_KEY_FILE", true),
  egressHosts: COMPUTE_SETTINGS.egressHosts,
  egressDnsServers: COMPUTE_SETTINGS.egressDnsServers,
  egressProtectedPorts: COMPUTE_SETTINGS.egressProtectedPorts,
  egressSpliceRelay: COMPUTE_SETTINGS.egressSpliceRelay,
  logLevel: logLevel(),
};

export type EgressProxyConfig = ReturnType<typeof loadEgressProxyConfig>;

export function loadEgressProxyConfig(env: NodeJS.ProcessEnv = process.env) {
  const s = readSettings(EGRESS_PROXY_SETTINGS, env);
  return { ...s, key: s.keyFile as Buffer };
}
