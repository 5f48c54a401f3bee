import { isIP } from "node:net";

/**
 * The address a login is throttled under: the socket's peer, or, behind
 * `trustedHops` proxies that each append the address they saw to
 * X-Forwarded-For, the entry that many hops from the right (anything to its
 * left was written by the client and proves nothing). Without a trusted
 * proxy the header is ignored: a client could otherwise pick a fresh
 * address for every guess.
 */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | null,
  trustedHops: number,
): string | undefined {
  if (trustedHops === 0 || !forwardedFor) return normalize(socketAddress);
  const hops = forwardedFor
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  // hops[-1] was added by the proxy nearest to us, and so on outwards.
  const candidate = hops[Math.max(0, hops.length - trustedHops)];
  return normalize(candidate && isIP(candidate) ? candidate : socketAddress);
}

// An IPv4 peer on a dual-stack socket reads as ::ffff:a.b.c.d.
const normalize = (address: string | undefined) => address?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1");
