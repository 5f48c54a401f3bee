export type Role = "owner" | "member";
export type KeyEnv = "live" | "test";

/** Who is calling: what every Verify RPC and the REST middleware resolve a credential to. */
export type AuthContext = {
  userId: string;
  orgId: string;
  mode: "jwt" | "api_key";
  role: Role;
  env: KeyEnv;
  /** kid of the signing key; JWT mode only. */
  authKeyId?: string;
  /** API key UUID; API key mode only. */
  apiKeyId?: string;
  /** `jwt_session` or `api_key:<prefix>`. */
  method: string;
  /** API key mode only: what the key may do (api-keys/scopes.ts). */
  scopes?: readonly string[];
  /**
   * API key mode only: a key owned by the organization. userId is then the
   * key's own id (it names no user) and role is member, so the key never
   * acts as the person who created it.
   */
  orgKey?: boolean;
};

export type Clock = () => Date;
export const systemClock: Clock = () => new Date();
