/** PostgreSQL SQLSTATE of a failed statement, if it is a database error. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

export const isUniqueViolation = (err: unknown): boolean => sqlState(err) === "23505";
export const isSerializationFailure = (err: unknown): boolean => sqlState(err) === "40001";
