import { promises as dns } from "node:dns";
import { isIP } from "node:net";

/** Resolves a destination name to addresses; the proxy checks and connects to what it returns. */
export type EgressResolver = (host: string) => Promise<string[]>;

export interface ResolverOptions {
  /** Fixed answers (COMPUTE_EGRESS_HOSTS), consulted first: name (lower case) → addresses. */
  hosts?: Map<string, string[]>;
  /** DNS servers to ask (COMPUTE_EGRESS_DNS_SERVERS); empty: the host's resolver (getaddrinfo). */
  servers?: string[];
  timeoutMs?: number;
}

/** "name=addr,name=addr2,other=addr3" → map (a name may repeat). Throws on a malformed entry. */
export function parseHostsSetting(value: string): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const entry of value
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const [name, address, ...rest] = entry.split("=");
    if (!name || !address || rest.length > 0 || isIP(address.trim()) === 0)
      throw new Error(`"${entry}" is not name=address`);
    const key = name.trim().toLowerCase().replace(/\.$/, "");
    map.set(key, [...(map.get(key) ?? []), address.trim()]);
  }
  return map;
}

export function createResolver(options: ResolverOptions = {}): EgressResolver {
  const timeoutMs = options.timeoutMs ?? 5000;
  const servers = options.servers ?? [];
  const resolver = servers.length > 0 ? new dns.Resolver({ timeout: timeoutMs, tries: 2 }) : undefined;
  resolver?.setServers(servers);
  return async (host) => {
    const name = host.toLowerCase().replace(/\.$/, "");
    const fixed = options.hosts?.get(name);
    if (fixed) return fixed;
    if (resolver) {
      const [v4, v6] = await Promise.all([
        resolver.resolve4(name).catch(() => [] as string[]),
        resolver.resolve6(name).catch(() => [] as string[]),
      ]);
      return [...v4, ...v6];
    }
    const found = await dns.lookup(name, { all: true, verbatim: true });
    return found.map((f) => f.address);
  };
}
