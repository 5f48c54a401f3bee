import { randomUUID } from "node:crypto";
import { AuthReason, PlatformError } from "@platform/errors";
import { SignJWT, decodeProtectedHeader, errors as joseErrors, jwtVerify } from "jose";
import type { Kysely } from "kysely";
import { type AuthContext, type Clock, type KeyEnv, systemClock } from "../auth/auth-context.ts";
import { isUuid } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { SigningKeys } from "../keys/signing-keys.ts";
import { currentRole } from "../users/memberships.ts";

export const ISSUER = "identity.platform";
export const AUDIENCE = ["agents", "identity"];
export const SCOPE = "default";
/** IssueJWT clamps any requested lifetime to this. */
export const MAX_TTL_SECONDS = 24 * 3600;
/** Lifetime used when IssueJWT is asked for zero. */
export const DEFAULT_ISSUE_TTL_SECONDS = 3600;

export type IssuedJwt = { token: string; kid: string; jti: string; expiresIn: number; expiresAt: Date };

const invalid = (message = "invalid token") => PlatformError.unauthenticated(message, AuthReason.invalidCredentials);

/**
 * Issues and verifies the platform's RS256 access tokens, with the claims of
 * the specification's table. The `env` claim is `live` when ENV is prod and
 * `test` otherwise (dev, staging): the spec's claim values are live|test.
 */
export class JwtService {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly keys: SigningKeys,
    private readonly options: { env: KeyEnv; clock?: Clock },
  ) {}

  get #now(): Date {
    return (this.options.clock ?? systemClock)();
  }

  async issue(userId: string, orgId: string, ttlSeconds: number): Promise<IssuedJwt> {
    const { kid, privateKey } = await this.keys.active();
    const iat = Math.floor(this.#now.getTime() / 1000);
    const jti = randomUUID();
    const token = await new SignJWT({ org_id: orgId, env: this.options.env, scope: SCOPE })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid })
      .setIssuer(ISSUER)
      .setSubject(userId)
      .setAudience(AUDIENCE)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + ttlSeconds)
      .setJti(jti)
      .sign(privateKey);
    return { token, kid, jti, expiresIn: ttlSeconds, expiresAt: new Date((iat + ttlSeconds) * 1000) };
  }

  /** IssueJWT: asserts the membership (PERMISSION_DENIED not_a_member), then issues with the clamped TTL. */
  async issueForMember(userId: string, orgId: string, ttlSeconds: number): Promise<IssuedJwt> {
    if (!isUuid(userId) || !isUuid(orgId)) throw PlatformError.invalidArgument("user_id and org_id must be UUIDs");
    if (!(await currentRole(this.db, userId, orgId))) throw PlatformError.permissionDenied("user is not a member of the organization", AuthReason.notAMember);
    return this.issue(userId, orgId, clampTtl(ttlSeconds));
  }

  /**
   * Verifies signature, algorithm, issuer, audience, time claims and key
   * state, then reads the role from the current membership (never from the
   * token). Throws UNAUTHENTICATED with reason expired, key_retired,
   * invalid_credentials or no_membership.
   */
  async verify(token: string): Promise<AuthContext> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw invalid();
    }
    // Only RS256 is ever issued: alg none, HS256 with the public key as the
    // secret and every other algorithm are refused before any key is used.
    if (header.alg !== "RS256" || typeof header.kid !== "string" || header.kid === "") throw invalid();
    const key = await this.keys.find(header.kid);
    if (!key) throw invalid("unknown signing key");
    if (key.state !== "active") throw PlatformError.unauthenticated("signing key retired", AuthReason.keyRetired);

    let payload: Awaited<ReturnType<typeof jwtVerify>>["payload"];
    try {
      ({ payload } = await jwtVerify(token, key.key, {
        algorithms: ["RS256"],
        issuer: ISSUER,
        audience: AUDIENCE,
        currentDate: this.#now,
        requiredClaims: ["sub", "iat", "nbf", "exp", "jti"],
      }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw PlatformError.unauthenticated("token expired", AuthReason.expired);
      throw invalid();
    }
    const { sub, org_id: orgId, env } = payload as { sub?: unknown; org_id?: unknown; env?: unknown };
    if (typeof sub !== "string" || !isUuid(sub) || typeof orgId !== "string" || !isUuid(orgId)) throw invalid();
    if (env !== "live" && env !== "test") throw invalid();
    if (payload.scope !== SCOPE) throw invalid();

    const role = await currentRole(this.db, sub, orgId);
    if (!role) throw PlatformError.unauthenticated("no membership in the token's organization", AuthReason.noMembership);
    return { userId: sub, orgId, mode: "jwt", role, env, authKeyId: key.kid, method: "jwt_session" };
  }
}

/** IssueJWT's TTL rule: 0 → 3600 s, anything else clamped to [1 s, 24 h]. */
export function clampTtl(seconds: number): number {
  if (!Number.isFinite(seconds) || seconds <= 0) return DEFAULT_ISSUE_TTL_SECONDS;
  return Math.min(Math.max(1, Math.floor(seconds)), MAX_TTL_SECONDS);
}
