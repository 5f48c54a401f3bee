/** The caller a bearer credential stands for. */
export interface Principal {
  userId: string;
  orgId: string;
  /**
   * An API key's scopes (identity's api-keys/scopes.ts); undefined for a JWT,
   * a person, whose role rules apply instead.
   */
  scopes?: readonly string[];
}

/**
 * Verifies the router's bearer credential. Throws PlatformError
 * unauthenticated for a bad one and unavailable when the verifier cannot be
 * reached.
 */
export interface Authenticator {
  verifyJwt(token: string, signal?: AbortSignal): Promise<Principal>;
  /** An API key, with its scopes (issue 19: the router checks `sessions:run`). */
  verifyApiKey(key: string, signal?: AbortSignal): Promise<Principal>;
}
