import { PlatformError } from "./platform-error.ts";

// Hyphenated hex of any version, either case: what a PostgreSQL uuid column
// takes, so an id that passes never makes a query fail (a 500) instead of a 400.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `value` is a UUID in its 8-4-4-4-12 hex form (any version, either case): the one UUID check of the platform. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/**
 * `value` lower-cased when it is a UUID; otherwise INVALID_ARGUMENT naming
 * `field` ("<field> is required" when empty, else "<field> must be a UUID"),
 * with `reason` where the service's contract names one.
 */
export function requireUuid(field: string, value: string, reason?: string): string {
  if (!value) throw PlatformError.invalidArgument(`${field} is required`, reason);
  if (!isUuid(value)) throw PlatformError.invalidArgument(`${field} must be a UUID`, reason);
  return value.toLowerCase();
}
