import { randomUUID } from "node:crypto";
import { isCompactJws } from "@platform/credentials";
import { AuthReason, PlatformError } from "@platform/errors";
import { decodeProtectedHeader, errors as joseErrors, jwtVerify } from "jose";
import { type AuthContext, type Clock, type KeyEnv, type Role, systemClock } from "../auth/auth-context.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { CoherentCache } from "../cache/coherent-cache.ts";
import { isUuid } from "../crypto/hash.ts";
import { type PublicKey, type SigningKeys, verifies } from "../keys/signing-keys.ts";
import type { MembershipRoles } from "../users/membership-roles.ts";
import { MAX_TTL_SECONDS } from "./max-ttl.ts";
import { signRs256 } from "./rs256-sign.ts";

export const ISSUER = "identity.platform";
export const AUDIENCE = ["agents", "identity"];
export const SCOPE = "default";
export { MAX_TTL_SECONDS } from "./max-ttl.ts";
/** Lifetime used when IssueJWT is asked for zero. */
export const DEFAULT_ISSUE_TTL_SECONDS = 3600;

export type IssuedJwt = { token: string; kid: string; jti: string; expiresIn: number; expiresAt: Date };

const invalid = (message = "invalid token") => PlatformError.unauthenticated(message, AuthReason.invalidCredentials);

/** What a verified signature vouches for; times in epoch seconds. */
type VerifiedClaims = { kid: string; sub: string; orgId: string; env: KeyEnv; nbf: number; exp: number };

/** Tokens whose signature was checked, by token string (a few MB at most: ~1 KB a token). */
const MAX_VERIFIED_TOKENS = 10_000;

/**
 * Issues and verifies the platform's RS256 access tokens, with the claims of
 * the specification's table. The `env` claim is `live` when ENV is prod and
 * `test` otherwise (dev, staging): the spec's claim values are live|test.
 */
export class JwtService {
  // Consumers verify the same token on every request until it expires: the
  // RSA signature and claim checks run once per token, while the key's state,
  // the clock and the membership are still consulted on every call.
  readonly #verified: CoherentCache<string, VerifiedClaims>;

  constructor(
    private readonly keys: SigningKeys,
    private readonly roles: MembershipRoles,
    caches: AuthCaches,
    private readonly options: { env: KeyEnv; clock?: Clock },
  ) {
    this.#verified = caches.create(MAX_VERIFIED_TOKENS);
    caches.on("s", (kid) => this.#verified.invalidateWhere((claims) => claims.kid === kid));
  }

  get #now(): Date {
    return (this.options.clock ?? systemClock)();
  }

  async issue(userId: string, orgId: string, ttlSeconds: number): Promise<IssuedJwt> {
    const { kid, privateKey } = await this.keys.active();
    const iat = Math.floor(this.#now.getTime() / 1000);
    const jti = randomUUID();
    const token = await signRs256(
      { typ: "JWT", kid },
      {
        org_id: orgId,
        env: this.options.env,
        scope: SCOPE,
        iss: ISSUER,
        sub: userId,
        aud: AUDIENCE,
        iat,
        nbf: iat,
        exp: iat + ttlSeconds,
        jti,
      },
      privateKey,
    );
    return { token, kid, jti, expiresIn: ttlSeconds, expiresAt: new Date((iat + ttlSeconds) * 1000) };
  }

  /** IssueJWT: asserts the membership (PERMISSION_DENIED not_a_member), then issues with the clamped TTL. */
  async issueForMember(userId: string, orgId: string, ttlSeconds: number): Promise<IssuedJwt> {
    if (!isUuid(userId) || !isUuid(orgId)) throw PlatformError.invalidArgument("user_id and org_id must be UUIDs");
    if (!(await this.roles.current(userId, orgId)))
      throw PlatformError.permissionDenied("user is not a member of the organization", AuthReason.notAMember);
    return this.issue(userId, orgId, clampTtl(ttlSeconds));
  }

  /**
   * Verifies signature, algorithm, issuer, audience, time claims and key
   * state, then reads the role from the current membership (never from the
   * token). Throws UNAUTHENTICATED with reason expired, key_retired,
   * invalid_credentials or no_membership.
   */
  async verify(token: string): Promise<AuthContext> {
    const cached = this.verifyCached(token);
    if (cached) return cached;
    // jose decodes padded, whitespace-laden and non-canonical base64url too:
    // only the exact serialization is one token (and one cache entry).
    if (!isCompactJws(token)) throw invalid();
    const claims = (await this.#verified.through(token, () => this.#verifySignature(token)))!;
    return this.#checkedSlowly(claims);
  }

  /**
   * `verify` of a token whose signature this service checked and still
   * caches, else undefined. Such a token is a compact JWS (it was checked
   * when stored), so a caller may ask before any check of its shape (the
   * Authenticator does, for VerifyToken's field: ~7 us a call here). With its
   * key and the membership's role cached too, the answer is made without an
   * await: a re-verified session's call is map look-ups.
   */
  verifyCached(token: string): Promise<AuthContext> | undefined {
    const claims = this.#verified.get(token);
    if (!claims) return undefined;
    const key = this.keys.cached(claims.kid);
    const role = key && this.roles.cached(claims.sub, claims.orgId);
    if (!key || !role) return this.#checkedSlowly(claims);
    try {
      this.#stillValid(claims, key);
      return Promise.resolve(cachedContextOf(claims, key, role));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async #checkedSlowly(claims: VerifiedClaims): Promise<AuthContext> {
    const key = await this.keys.find(claims.kid);
    this.#stillValid(claims, key);
    return contextOf(claims, key, await this.roles.current(claims.sub, claims.orgId));
  }

  /**
   * Checked again on a cached verification: retirement and expiry apply to
   * a token already seen, in the order a first verification reports them.
   */
  #stillValid(claims: VerifiedClaims, key: PublicKey | undefined): asserts key is PublicKey {
    if (!key) throw invalid("unknown signing key");
    if (!verifies(key)) throw PlatformError.unauthenticated("signing key retired", AuthReason.keyRetired);
    const now = Math.floor(this.#now.getTime() / 1000);
    if (claims.exp <= now) throw PlatformError.unauthenticated("token expired", AuthReason.expired);
    if (claims.nbf > now) throw invalid();
  }

  async #verifySignature(token: string): Promise<VerifiedClaims> {
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
    if (!verifies(key)) throw PlatformError.unauthenticated("signing key retired", AuthReason.keyRetired);

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
      if (err instanceof joseErrors.JWTExpired)
        throw PlatformError.unauthenticated("token expired", AuthReason.expired);
      throw invalid();
    }
    const { sub, org_id: orgId, env } = payload as { sub?: unknown; org_id?: unknown; env?: unknown };
    if (typeof sub !== "string" || !isUuid(sub) || typeof orgId !== "string" || !isUuid(orgId)) throw invalid();
    if (env !== "live" && env !== "test") throw invalid();
    if (payload.scope !== SCOPE) throw invalid();
    return { kid: key.kid, sub, orgId, env, nbf: payload.nbf!, exp: payload.exp! };
  }
}

/** The last answer for a cached token's claims, with the key and role it was made with. */
const answers = new WeakMap<VerifiedClaims, { key: PublicKey; role: Role; context: AuthContext }>();

/**
 * contextOf for a cached token: the same frozen AuthContext while its key
 * and role are the same objects as last time (every call of a re-verified
 * session), so a handler may keep what it makes of it (VerifyToken's reply,
 * encoded once: handlers.ts) instead of making it again each call. Frozen:
 * callers share it.
 */
function cachedContextOf(claims: VerifiedClaims, key: PublicKey, role: Role): AuthContext {
  const last = answers.get(claims);
  if (last !== undefined && last.key === key && last.role === role) return last.context;
  const context = Object.freeze(contextOf(claims, key, role));
  answers.set(claims, { key, role, context });
  return context;
}

/** The caller a verified token stands for, with the current membership's role (never the token's). */
function contextOf(claims: VerifiedClaims, key: PublicKey, role: Role | undefined): AuthContext {
  if (!role) throw PlatformError.unauthenticated("no membership in the token's organization", AuthReason.noMembership);
  return {
    userId: claims.sub,
    orgId: claims.orgId,
    mode: "jwt",
    role,
    env: claims.env,
    authKeyId: key.kid,
    method: "jwt_session",
  };
}

/** IssueJWT's TTL rule: 0 → 3600 s, anything else clamped to [1 s, 24 h]. */
export function clampTtl(seconds: number): number {
  if (!Number.isFinite(seconds) || seconds <= 0) return DEFAULT_ISSUE_TTL_SECONDS;
  return Math.min(Math.max(1, Math.floor(seconds)), MAX_TTL_SECONDS);
}
