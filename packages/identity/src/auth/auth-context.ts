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

/**
 * Whether the caller may manage the organization's people and read its audit
 * log: a person whose role is owner, or an API key with the `admin` scope that
 * is the organization's own or a personal key of a user who is an owner now
 * (a member's key is not made an owner by a scope).
 */
export function actsAsOwner(caller: AuthContext): boolean {
  if (caller.mode === "jwt") return caller.role === "owner";
  return (caller.scopes?.includes("admin") ?? false) && (caller.orgKey === true || caller.role === "owner");
}

export type Clock = () => Date;
export const systemClock: Clock = () => new Date();
