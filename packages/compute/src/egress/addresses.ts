import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { type NetworkPolicy, parseCidr } from "@platform/network-policy";

/**
 * Address ranges a sandbox never reaches unless its policy lists a CIDR
 * inside that range: "this" network, private (RFC 1918, unique local),
 * shared (CGNAT), loopback, link-local, IETF protocol assignments,
 * multicast and reserved. A wide rule (0.0.0.0/0) does not open them.
 */
const SPECIAL = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.168.0.0/16",
  "224.0.0.0/4",
  "240.0.0.0/4",
  "::/128",
  "::1/128",
  "fc00::/7",
  "fe80::/10",
  "ff00::/8",
].map((c) => parseCidr(c) as NonNullable<ReturnType<typeof parseCidr>>);

/** "::ffff:10.0.0.1" is 10.0.0.1 to the kernel: checked as such. */
export function canonicalAddress(address: string): string {
  let a = address.toLowerCase();
  // One spelling per IPv6 address ("0:0:0:0:0:0:0:1" is "::1"), so comparisons with the host's addresses hold.
  if (isIP(a) === 6) a = new URL(`http://[${a}]/`).hostname.slice(1, -1);
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (m) return m[1] as string;
  // URL writes a mapped IPv4 address in hex ("::ffff:7f00:1").
  const h = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(a);
  if (h) {
    const hi = Number.parseInt(h[1] as string, 16);
    const lo = Number.parseInt(h[2] as string, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return a;
}

/** One BlockList per range, made once (a connection checks every special range). */
const lists = new Map<string, BlockList>();

function within(address: string, cidr: { address: string; prefix: number; family: "ipv4" | "ipv6" }): boolean {
  const version = isIP(address);
  if ((version === 4) !== (cidr.family === "ipv4")) return false;
  const key = `${cidr.address}/${cidr.prefix}`;
  let list = lists.get(key);
  if (!list) {
    list = new BlockList();
    list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    // Policies' ranges come and go; the special ones stay. Bounded either way.
    if (lists.size < 4096) lists.set(key, list);
  }
  return list.check(address, cidr.family);
}

/** Every special range in one list: most addresses a sandbox asks for are in none, answered by one check. */
const ANY_SPECIAL = new BlockList();
for (const r of SPECIAL) ANY_SPECIAL.addSubnet(r.address, r.prefix, r.family);
const LOOPBACK = SPECIAL.find((r) => r.address === "127.0.0.0") as (typeof SPECIAL)[number];

/** The special range holding address, if any. */
export function specialRange(address: string): string | undefined {
  const a = canonicalAddress(address);
  const version = isIP(a);
  if (version === 0 || !ANY_SPECIAL.check(a, version === 4 ? "ipv4" : "ipv6")) return undefined;
  const hit = SPECIAL.find((r) => within(a, r));
  return hit ? `${hit.address}/${hit.prefix}` : undefined;
}

/**
 * Is address (special) opened by a CIDR rule of the policy that lies inside
 * its special range and allows the port?
 */
export function explicitlyAllowed(policy: NetworkPolicy, address: string, port: number): boolean {
  const a = canonicalAddress(address);
  const range = SPECIAL.find((r) => within(a, r));
  for (const rule of policy.allowedCidrs) {
    if (rule.ports.length > 0 && !rule.ports.includes(port)) continue;
    const c = parseCidr(rule.cidr);
    if (!c || !within(a, c)) continue;
    if (!range || (c.prefix >= range.prefix && within(c.address, range))) return true;
  }
  return false;
}

/** The host's own addresses (every interface), read now (~30 µs). */
export function hostAddresses(): Set<string> {
  const addresses = new Set<string>(["0.0.0.0", "::"]);
  for (const list of Object.values(networkInterfaces())) {
    for (const i of list ?? []) addresses.add(canonicalAddress(i.address.replace(/%.*$/, "")));
  }
  return addresses;
}

/** An address of this host (loopback included): where identity, compute and PostgreSQL listen. */
export function isHostAddress(address: string): boolean {
  const a = canonicalAddress(address);
  if (a === "::1" || within(a, LOOPBACK)) return true;
  return hostAddresses().has(a);
}
