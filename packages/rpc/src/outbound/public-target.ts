import { lookup as dnsLookup } from "node:dns";
import { lookup } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";

/**
 * Addresses a server-side request to a URL a tenant wrote (an agent's MCP
 * server, an organization's webhook endpoint) may not go to unless the
 * service's setting allows it (AGENTS_MCP_ALLOW_PRIVATE_TARGETS,
 * WEBHOOKS_ALLOW_PRIVATE_TARGETS): otherwise the service would call the
 * host's and the cluster's own services (loopback, the pod and service
 * networks, a cloud's metadata address) on the tenant's behalf.
 */
const NOT_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3],
] as const)
  NOT_PUBLIC.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const)
  NOT_PUBLIC.addSubnet(net, prefix, "ipv6");

/** Whether an IP address is publicly routable (not loopback, private, link-local, shared, multicast or reserved). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !NOT_PUBLIC.check(address, "ipv4");
  if (family !== 6) return false;
  // An IPv4 address written as IPv6 (::ffff:a.b.c.d) is judged as the IPv4 one.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return isPublicAddress(mapped[1]);
  return !NOT_PUBLIC.check(address, "ipv6");
}

/**
 * Refuses a URL whose host is or resolves to a non-public address (every
 * address it resolves to must be public). The connection resolves the name
 * again, so a name whose answers change between the two lookups (DNS
 * rebinding) is not stopped by this check alone; THREAT_MODEL.md says so.
 */
export async function assertPublicTarget(url: URL, setting = "AGENTS_MCP_ALLOW_PRIVATE_TARGETS"): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  const refused = addresses.find((a) => !isPublicAddress(a));
  if (refused !== undefined || addresses.length === 0)
    throw new Error(`${url.host} is not a public address (${setting} is off)`);
}

/**
 * A `lookup` for node:http(s) requests that refuses a name resolving to a
 * non-public address. The connection uses the very addresses checked here,
 * so DNS rebinding between a check and the connection is not possible.
 * (A literal IP in the URL is not looked up: check it with assertPublicTarget.)
 */
export function publicOnlyLookup(setting: string): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = addresses as unknown as { address: string; family: number }[];
      const refused = list.find((a) => !isPublicAddress(a.address));
      if (refused || list.length === 0) {
        const e = Object.assign(new Error(`${hostname} is not a public address (${setting} is off)`), {
          code: "ENOTPUBLIC",
        });
        return callback(e, "", 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: typeof list) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** fetch for MCP transports: each request's target checked first, redirects not followed. */
export const publicOnlyFetch: typeof fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  await assertPublicTarget(url);
  return fetch(input, { ...init, redirect: "manual" });
};
