import { Code, PlatformError } from "@platform/errors";

/** PostgreSQL SQLSTATE of a failed statement, if it is a database error. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** A unique constraint refused the write (SQLSTATE 23505), on PostgreSQL and PGlite alike. */
export const isUniqueViolation = (err: unknown): boolean => sqlState(err) === "23505";
/** A serializable transaction lost a conflict and may be retried (SQLSTATE 40001). */
export const isSerializationFailure = (err: unknown): boolean => sqlState(err) === "40001";

// Socket-level failures of reaching the server (node's error codes).
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENOENT",
]);

/**
 * The database cannot be reached or cannot serve now, as opposed to a
 * statement that failed: refused or lost connections, pg's "Connection
 * terminated", SQLSTATE class 08 (connection exception), 57P01–57P03 (the
 * server shutting down, crashed or starting) and 53300 (no connection
 * slots left). Retrying later can succeed; the request was not at fault.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof PlatformError) return false;
  const state = sqlState(err);
  if (state) return state.startsWith("08") || /^57P0[123]$/.test(state) || state === "53300";
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && UNREACHABLE.has(code)) return true;
  const message = err instanceof Error ? err.message : "";
  return /^Connection terminated|not queryable|Client was closed|timeout exceeded when trying to connect/i.test(
    message,
  );
}

/** Seconds a caller is told to wait when the database is down: a restart or failover takes a few. */
export const DATABASE_DOWN_RETRY_AFTER_SECONDS = 5;

/**
 * The one rule for a database that is down: UNAVAILABLE (503 with
 * Retry-After on REST), never INTERNAL, whatever service asked. Anything
 * else passes through unchanged.
 */
export function mapDatabaseError(err: unknown): unknown {
  if (!isDatabaseUnavailable(err)) return err;
  return new PlatformError(
    Code.Unavailable,
    "unavailable",
    "the database is unavailable; retry shortly",
    { retry_after: String(DATABASE_DOWN_RETRY_AFTER_SECONDS) },
    { cause: err },
  );
}
