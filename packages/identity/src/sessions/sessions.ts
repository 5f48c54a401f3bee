import { IdentityRestCode, ErrorAction, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import { type AuthContext, type Clock, systemClock } from "../auth/auth-context.ts";
import { isUuid } from "../crypto/hash.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";
import type { LoginThrottle } from "../login-throttle/login-throttle.ts";
import type { JwtService } from "../tokens/jwt-service.ts";
import { currentRole } from "../users/memberships.ts";
import type { Users } from "../users/users.ts";
import { type Actor, actorOf, auditReuse, loginAuditRow, type RequestMeta, recordAudit } from "../audit/audit-log.ts";
import { type RefreshTokens, revokeFamiliesOf } from "./refresh-tokens.ts";

export type TokenPair = { accessToken: string; tokenType: "Bearer"; expiresIn: number; refreshToken: string };

const MAX_PASSWORD_CHARS = 1024;
const MAX_DEVICE_LABEL = 200;

// One body for a wrong email, a wrong password and a missing membership, so
// the response never tells which one it was.
const loginFailed = () => PlatformError.unauthenticated("invalid email or password", IdentityRestCode.unauthenticated);
const refreshInvalid = () =>
  PlatformError.unauthenticated("refresh token is invalid", IdentityRestCode.refreshTokenInvalid);

/** Login, refresh with rotation and reuse detection, logout, revoke-all. */
export class Sessions {
  constructor(
    private readonly deps: {
      db: Kysely<IdentityDB>;
      users: Users;
      hasher: PasswordHasher;
      jwt: JwtService;
      refreshTokens: RefreshTokens;
      throttle: LoginThrottle;
      jwtTtlSeconds: number;
      clock?: Clock;
    },
  ) {}

  get #now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /**
   * Login behind the throttle: a blocked account or client address is
   * refused (429) before any hashing; every answer after it is the same for
   * an unknown email as for a wrong password.
   */
  async login(input: {
    email: string;
    password: string;
    deviceLabel?: string;
    clientAddress?: string;
    /** Recorded with the session's audit entry (auth.login). */
    requestId?: string;
    signal?: AbortSignal;
  }): Promise<TokenPair> {
    if (input.email === "" || input.password === "") {
      throw PlatformError.invalidArgument("email and password are required", IdentityRestCode.invalidRequest);
    }
    if (input.deviceLabel && input.deviceLabel.length > MAX_DEVICE_LABEL) {
      throw PlatformError.invalidArgument(
        `x_device_label must be at most ${MAX_DEVICE_LABEL} characters`,
        IdentityRestCode.invalidRequest,
      );
    }
    // Checked first: a throttled caller is answered without touching the
    // database or the hashing queue; then a login beyond what the hashing
    // queue can serve is refused at once (PasswordHasher.admit).
    const attempt = this.deps.throttle.begin(input.email, input.clientAddress);
    const { user, membership } = await this.deps.hasher
      .admit(() => this.#checkCredentials(input.email, input.password, input.signal))
      .catch((err: unknown) => {
        // Refused without a verdict (hashing queue full, database down, caller gone): not a failed guess.
        if (!(err instanceof PlatformError && err.reason === IdentityRestCode.unauthenticated))
          this.deps.throttle.withdraw(attempt);
        throw err;
      });
    this.deps.throttle.succeeded(attempt);
    const now = this.#now;
    const refreshToken = await this.deps.refreshTokens.startFamily(
      user.id,
      membership.orgId,
      input.deviceLabel || undefined,
      now,
      loginAuditRow({ requestId: input.requestId, clientAddress: input.clientAddress }, user.id, membership.orgId),
    );
    return this.#pair(user.id, membership.orgId, refreshToken);
  }

  /** The user and membership the credentials stand for, or the one 401 for every kind of wrong. */
  async #checkCredentials(email: string, rawPassword: string, signal: AbortSignal | undefined) {
    // Over-long passwords would be a cheap way to burn hashing time; they can
    // never match, and fail with the same body after the same dummy work.
    const password = rawPassword.length > MAX_PASSWORD_CHARS ? "" : rawPassword;
    const user = await this.deps.users.findForLogin(email);
    if (!user || password === "") {
      await this.deps.hasher.verifyDummy(rawPassword.slice(0, MAX_PASSWORD_CHARS), signal);
      throw loginFailed();
    }
    if (!(await this.deps.hasher.verify(user.passwordHash, password, signal))) throw loginFailed();
    const membership = user.membership;
    if (!membership) throw loginFailed();
    return { user, membership };
  }

  async refresh(raw: string, meta: RequestMeta = {}): Promise<TokenPair> {
    if (raw === "")
      throw PlatformError.invalidArgument("refresh_token is required", IdentityRestCode.refreshTokenRequired);
    if (!raw.startsWith("rt_") || raw.length > 200) throw refreshInvalid();
    const now = this.#now;
    const result = await this.deps.refreshTokens.consume(raw, now);
    if (result.kind === "invalid") throw refreshInvalid();
    if (result.kind === "reused") {
      await auditReuse(this.deps.db, result.familyId, meta);
      throw PlatformError.unauthenticated(
        "refresh token already used; the session has been revoked",
        IdentityRestCode.refreshTokenReused,
        {
          action: ErrorAction.reAuthenticate,
        },
      );
    }
    // A user removed from the org keeps no way back in through an old session.
    if (!(await currentRole(this.deps.db, result.userId, result.orgId))) {
      await this.deps.refreshTokens.revokeFamily(result.familyId, now);
      throw refreshInvalid();
    }
    const next = await this.deps.refreshTokens.rotate(result.familyId, now);
    return this.#pair(result.userId, result.orgId, next);
  }

  /** Always succeeds: an unknown or empty token is a no-op. */
  async logout(raw: string): Promise<void> {
    if (raw === "" || raw.length > 200) return;
    await this.deps.refreshTokens.revokeByToken(raw, this.#now);
  }

  /**
   * Owner only. The target must be a member of the caller's org (else 404
   * resource_not_found, as for any other tenant's entity); then every
   * non-revoked refresh token of that user is revoked, as the spec says.
   */
  async revokeAll(caller: AuthContext, userId: string, actor: Actor = actorOf(caller, {})): Promise<void> {
    if (userId === "") throw PlatformError.invalidArgument("user_id is required", IdentityRestCode.userIdRequired);
    if (!isUuid(userId)) throw PlatformError.invalidArgument("user_id must be a UUID", IdentityRestCode.userIdInvalid);
    if (caller.role !== "owner")
      throw PlatformError.permissionDenied("owner role required", IdentityRestCode.insufficientRole);
    if (!(await currentRole(this.deps.db, userId, caller.orgId))) {
      throw PlatformError.notFound("user not found in your organization", IdentityRestCode.resourceNotFound);
    }
    await this.deps.db.transaction().execute(async (trx) => {
      const families = await revokeFamiliesOf(trx, userId, undefined, this.#now);
      await recordAudit(trx, actor, {
        action: "auth.revoke_all",
        target: { type: "user", id: userId },
        details: { sessions_revoked: families },
      });
    });
  }

  async #pair(userId: string, orgId: string, refreshToken: string): Promise<TokenPair> {
    const jwt = await this.deps.jwt.issue(userId, orgId, this.deps.jwtTtlSeconds);
    return { accessToken: jwt.token, tokenType: "Bearer", expiresIn: jwt.expiresIn, refreshToken };
  }
}
