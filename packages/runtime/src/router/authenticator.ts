/** The caller a bearer JWT stands for. */
export interface Principal {
  userId: string;
  orgId: string;
}

/**
 * Verifies the router's bearer JWT. Throws PlatformError unauthenticated for
 * a bad token and unavailable when the verifier cannot be reached.
 */
export interface Authenticator {
  verifyJwt(token: string, signal?: AbortSignal): Promise<Principal>;
}
