import { type Clock, systemClock } from "../auth/auth-context.ts";
import type { JwtService } from "../tokens/jwt-service.ts";
import type { RefreshTokens } from "./refresh-tokens.ts";
import type { TokenPair } from "./sessions.ts";

/**
 * A new session (refresh-token family and access token) for a user in an
 * org, for the ways in other than a password login: an accepted invitation,
 * sign-up, a switch of organization, a changed password.
 */
export class TokenPairs {
  constructor(
    private readonly deps: { jwt: JwtService; refreshTokens: RefreshTokens; jwtTtlSeconds: number; clock?: Clock },
  ) {}

  async start(userId: string, orgId: string, deviceLabel?: string): Promise<TokenPair> {
    const refreshToken = await this.deps.refreshTokens.startFamily(
      userId,
      orgId,
      deviceLabel || undefined,
      (this.deps.clock ?? systemClock)(),
    );
    const jwt = await this.deps.jwt.issue(userId, orgId, this.deps.jwtTtlSeconds);
    return { accessToken: jwt.token, tokenType: "Bearer", expiresIn: jwt.expiresIn, refreshToken };
  }
}
