import { BlockList, isIP } from "node:net";

/**
 * Proxies whose X-Forwarded-For is believed (LOGIN_TRUSTED_PROXIES): their
 * addresses or CIDRs. The platform's own router sets the header to the
 * address it saw (replacing any the client sent); identity believes it only
 * on a connection from one of these addresses.
 */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly entries: readonly string[];

  /** Throws on an entry that is neither an IP address nor a CIDR. */
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      const [address = "", bits, extra] = entry.split("/");
      const family = isIP(address);
      const prefix = bits === undefined ? undefined : Number(bits);
      const max = family === 4 ? 32 : 128;
      if (family === 0 || extra !== undefined || (prefix !== undefined && (!/^\d{1,3}$/.test(bits!) || prefix > max))) {
        throw new Error(`not an IP address or CIDR: ${JSON.stringify(entry)}`);
      }
      const type = family === 4 ? "ipv4" : "ipv6";
      if (prefix === undefined) this.#list.addAddress(address, type);
      else this.#list.addSubnet(address, prefix, type);
    }
    this.entries = [...entries];
  }

  has(address: string | undefined): boolean {
    const a = normalize(address);
    const family = a ? isIP(a) : 0;
    return family !== 0 && this.#list.check(a!, family === 4 ? "ipv4" : "ipv6");
  }

  get size(): number {
    return this.entries.length;
  }
}

/**
 * The address a login is throttled (and an audit event recorded) under:
 *
 * - from a trusted proxy (`trusted`, LOGIN_TRUSTED_PROXIES): the
 *   X-Forwarded-For entries are read from the right, skipping addresses that
 *   are themselves trusted proxies; the first other one is the client (an
 *   entry that is not an address ends the walk: the last trusted hop's peer);
 * - otherwise, behind `trustedHops` proxies that each append the address
 *   they saw (LOGIN_TRUSTED_PROXY_HOPS), the entry that many hops from the
 *   right (anything to its left was written by the client and proves
 *   nothing);
 * - else the socket's peer: a client could otherwise pick a fresh address for
 *   every guess.
 */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | null,
  trustedHops: number,
  trusted?: TrustedProxies,
): string | undefined {
  const hops = (forwardedFor ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (trusted && hops.length > 0 && trusted.has(socketAddress)) {
    let client = normalize(socketAddress);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = normalize(hops[i]);
      if (!hop || isIP(hop) === 0) break;
      client = hop;
      if (!trusted.has(hop)) break;
    }
    return client;
  }
  if (trustedHops === 0 || hops.length === 0) return normalize(socketAddress);
  // hops[-1] was added by the proxy nearest to us, and so on outwards.
  const candidate = hops[Math.max(0, hops.length - trustedHops)];
  return normalize(candidate && isIP(candidate) ? candidate : socketAddress);
}

// An IPv4 peer on a dual-stack socket reads as ::ffff:a.b.c.d.
const normalize = (address: string | undefined) => address?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, "$1");
