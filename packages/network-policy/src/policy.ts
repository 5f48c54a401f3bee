import { BlockList, isIP } from "node:net";
import { ComputeReason, PlatformError } from "@platform/errors";

/** A sandbox's outbound network (compute.v1.NetworkPolicy), validated and normalised. */
export interface NetworkPolicy {
  allowAll: boolean;
  /** Lower case, without a trailing dot; "*.example.com" matches names below example.com. */
  allowedDomains: string[];
  allowedCidrs: CidrRule[];
}

export interface CidrRule {
  /** Normalised "address/prefix". */
  cidr: string;
  /** Empty: every port. */
  ports: number[];
}

export const POLICY_LIMITS = {
  maxDomains: 256,
  maxCidrs: 256,
  maxPortsPerCidr: 64,
  maxDomainLength: 253,
} as const;

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}

/** Quotes an offending entry in a message (bounded: the entry is the caller's input). */
function quote(entry: string): string {
  return JSON.stringify(entry.length > 64 ? `${entry.slice(0, 64)}…` : entry);
}

function normaliseDomain(raw: string, index: number): string {
  const field = `network_policy.allowed_domains[${index}]`;
  let d = raw.trim().toLowerCase();
  if (d.endsWith(".")) d = d.slice(0, -1);
  const wildcard = d.startsWith("*.");
  const name = wildcard ? d.slice(2) : d;
  if (
    name.length === 0 ||
    d.length > POLICY_LIMITS.maxDomainLength ||
    isIP(name) !== 0 ||
    !name.split(".").every((l) => LABEL.test(l)) ||
    (wildcard && !name.includes("."))
  ) {
    throw invalid(
      `${field} ${quote(raw)} is not a domain name (exact "example.com" or one leading wildcard "*.example.com"; addresses go in allowed_cidrs)`,
    );
  }
  return d;
}

/** "a.b.c.d/n", "x::/n" or a bare address (a /32 or /128); the address is normalised to its network. */
export function parseCidr(raw: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const [addr, len, ...rest] = raw.trim().split("/");
  if (rest.length > 0 || addr === undefined) return undefined;
  const version = isIP(addr);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  if (len !== undefined && !/^\d{1,3}$/.test(len)) return undefined;
  const prefix = len === undefined ? max : Number(len);
  if (prefix > max) return undefined;
  return { address: addr.toLowerCase(), prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

function normaliseCidr(rule: { cidr: string; ports: number[] }, index: number): CidrRule {
  const field = `network_policy.allowed_cidrs[${index}]`;
  const parsed = parseCidr(rule.cidr);
  if (!parsed)
    throw invalid(`${field} ${quote(rule.cidr)} is not a CIDR ("203.0.113.0/24", "2001:db8::/32") or address`);
  if (rule.ports.length > POLICY_LIMITS.maxPortsPerCidr)
    throw invalid(`${field} has ${rule.ports.length} ports (at most ${POLICY_LIMITS.maxPortsPerCidr})`);
  for (const p of rule.ports) {
    if (!Number.isInteger(p) || p < 1 || p > 65535) throw invalid(`${field}.ports: ${p} is not a port (1-65535)`);
  }
  return { cidr: `${parsed.address}/${parsed.prefix}`, ports: [...new Set(rule.ports)].sort((a, b) => a - b) };
}

/**
 * Checks a policy from a caller: every domain and CIDR well-formed (else
 * INVALID_ARGUMENT naming the entry), within the size limits. Returns it
 * normalised (lower case, duplicates removed).
 */
export function validateNetworkPolicy(input: {
  allowAll?: boolean;
  allowedDomains?: string[];
  allowedCidrs?: { cidr: string; ports?: number[] }[];
}): NetworkPolicy {
  const domains = input.allowedDomains ?? [];
  const cidrs = input.allowedCidrs ?? [];
  if (domains.length > POLICY_LIMITS.maxDomains)
    throw invalid(`network_policy.allowed_domains has ${domains.length} entries (at most ${POLICY_LIMITS.maxDomains})`);
  if (cidrs.length > POLICY_LIMITS.maxCidrs)
    throw invalid(`network_policy.allowed_cidrs has ${cidrs.length} entries (at most ${POLICY_LIMITS.maxCidrs})`);
  return {
    allowAll: input.allowAll ?? false,
    allowedDomains: [...new Set(domains.map(normaliseDomain))],
    allowedCidrs: cidrs.map((c, i) => normaliseCidr({ cidr: c.cidr, ports: c.ports ?? [] }, i)),
  };
}

/** Does the policy name this host (exact or by a wildcard)? */
export function domainAllowed(policy: NetworkPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, "");
  return policy.allowedDomains.some((d) =>
    d.startsWith("*.") ? h.endsWith(d.slice(1)) && h.length > d.length - 1 : h === d,
  );
}

/** The first CIDR rule holding this address and port, if any. */
export function cidrAllows(policy: NetworkPolicy, address: string, port: number): boolean {
  for (const rule of policy.allowedCidrs) {
    if (rule.ports.length > 0 && !rule.ports.includes(port)) continue;
    if (inCidr(address, rule.cidr)) return true;
  }
  return false;
}

export function inCidr(address: string, cidr: string): boolean {
  const parsed = parseCidr(cidr);
  const version = isIP(address);
  if (!parsed || version === 0) return false;
  const list = new BlockList();
  list.addSubnet(parsed.address, parsed.prefix, parsed.family);
  return list.check(address, version === 4 ? "ipv4" : "ipv6");
}

/** Stored form (the record's JSON column). */
export function policyToJson(policy: NetworkPolicy | undefined): string | null {
  return policy ? JSON.stringify(policy) : null;
}

export function policyFromJson(value: unknown): NetworkPolicy | undefined {
  if (value === null || value === undefined) return undefined;
  const p = (typeof value === "string" ? JSON.parse(value) : value) as NetworkPolicy;
  return { allowAll: !!p.allowAll, allowedDomains: p.allowedDomains ?? [], allowedCidrs: p.allowedCidrs ?? [] };
}
