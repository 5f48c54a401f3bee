import { isUuid, PlatformError } from "@platform/errors";

/** Lower-cases and checks a tenant UUID; invalid_argument otherwise. */
export function normalizeTenantId(tenantId: string): string {
  const id = tenantId.trim().toLowerCase();
  if (!isUuid(id)) throw PlatformError.invalidArgument(`tenant id must be a UUID`);
  return id;
}

/**
 * `tenant_short` = the first 8 characters of the lower-case hex of the tenant
 * UUID. In the canonical 8-4-4-4-12 form the first dash comes after 8 hex
 * digits, so this is the same with or without dashes.
 */
export function tenantShort(tenantId: string): string {
  return normalizeTenantId(tenantId).slice(0, 8);
}

/** The n-th candidate short id: `abcd1234`, then `abcd1234-2`, `abcd1234-3`, ... */
export function candidateShort(short: string, n: number): string {
  return n <= 1 ? short : `${short}-${n}`;
}

export function deploymentName(resolvedShort: string): string {
  return `runtime-t-${resolvedShort}`;
}
