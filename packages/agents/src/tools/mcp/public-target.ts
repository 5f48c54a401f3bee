import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

/**
 * Addresses an agent's MCP server may not be at unless
 * AGENTS_MCP_ALLOW_PRIVATE_TARGETS is on: an MCP server URL is written by
 * any caller with agents:write, and the agents service would otherwise call
 * the host's and the cluster's own services (loopback, the pod and service
 * networks, a cloud's metadata address) on their behalf.
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
export async function assertPublicTarget(url: URL): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  const refused = addresses.find((a) => !isPublicAddress(a));
  if (refused !== undefined || addresses.length === 0)
    throw new Error(`${url.host} is not a public address (AGENTS_MCP_ALLOW_PRIVATE_TARGETS is off)`);
}

/** fetch for MCP transports: each request's target checked first, redirects not followed. */
export const publicOnlyFetch: typeof fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  await assertPublicTarget(url);
  return fetch(input, { ...init, redirect: "manual" });
};
