import { IdentityRestCode, PlatformError } from "@platform/errors";

/**
 * What an API key may do. `read`: every GET; `agents:write`: create, update
 * and delete agents; `sessions:run`: sessions, messages, deleting sessions
 * and the router's invoke; `admin`: what an owner does to the organization's
 * people (invitations, members, the audit log; server/policies.ts "admin"),
 * for an organization key or a current owner's personal key. A JWT (a person)
 * has no scopes: the role rules apply to it instead.
 */
export const API_KEY_SCOPES = ["read", "agents:write", "sessions:run", "admin"] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

const known = new Set<string>(API_KEY_SCOPES);

/**
 * What a key gets when none is asked for: everything a key could do before
 * scopes existed, so a client that predates scopes creates the same key as
 * before. Not `admin`, which no key had: it is given only when asked for.
 */
export const DEFAULT_SCOPES: readonly ApiKeyScope[] = ["read", "agents:write", "sessions:run"];

/**
 * The scopes a new key gets: none given means DEFAULT_SCOPES. Duplicates
 * fold; an unknown scope is invalid_request. Kept in the canonical order.
 */
export function parseScopes(given: readonly string[] | undefined): ApiKeyScope[] {
  if (!given || given.length === 0) return [...DEFAULT_SCOPES];
  for (const s of given) {
    if (!known.has(s))
      throw PlatformError.invalidArgument(
        `unknown scope (one of ${API_KEY_SCOPES.join(", ")})`,
        IdentityRestCode.invalidRequest,
      );
  }
  return API_KEY_SCOPES.filter((s) => given.includes(s));
}
