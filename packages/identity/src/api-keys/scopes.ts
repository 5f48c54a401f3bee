import { IdentityRestCode, PlatformError } from "@platform/errors";

/**
 * What an API key may do. `read`: every GET; `agents:write`: create, update
 * and delete agents; `sessions:run`: sessions, messages, deleting sessions
 * and the router's invoke; `admin`: identity's own calls that change the org.
 * A JWT (a person) has no scopes: the role rules apply to it instead.
 */
export const API_KEY_SCOPES = ["read", "agents:write", "sessions:run", "admin"] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

const known = new Set<string>(API_KEY_SCOPES);

/**
 * The scopes a new key gets: none given means all of them, so a client that
 * predates scopes creates the same full-access key as before. Duplicates fold;
 * an unknown scope is invalid_request. Kept in the canonical order.
 */
export function parseScopes(given: readonly string[] | undefined): ApiKeyScope[] {
  if (!given || given.length === 0) return [...API_KEY_SCOPES];
  for (const s of given) {
    if (!known.has(s))
      throw PlatformError.invalidArgument(
        `unknown scope (one of ${API_KEY_SCOPES.join(", ")})`,
        IdentityRestCode.invalidRequest,
      );
  }
  return API_KEY_SCOPES.filter((s) => given.includes(s));
}
