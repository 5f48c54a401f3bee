import { AuthReason, PlatformError } from "@platform/errors";
import { looksLikeApiKey } from "../api-keys/api-key-format.ts";
import type { ApiKeys } from "../api-keys/api-keys.ts";
import type { JwtService } from "../tokens/jwt-service.ts";
import type { AuthContext, KeyEnv } from "./auth-context.ts";

const MAX_CREDENTIAL_CHARS = 8192;

/** Strips an optional `Bearer ` scheme (case-insensitive) from a credential. */
export function stripBearer(value: string): string {
  const m = /^\s*bearer\s+(.*)$/i.exec(value);
  return (m ? m[1]! : value).trim();
}

/**
 * Resolves any bearer credential: `sk_live_`/`sk_test_` is an API key,
 * anything else is tried as a JWT. The same logic backs VerifyToken and the
 * REST middleware.
 */
export class Authenticator {
  constructor(
    private readonly jwt: JwtService,
    private readonly apiKeys: ApiKeys,
  ) {}

  async verifyToken(credential: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    const token = stripBearer(credential);
    if (token === "" || token.length > MAX_CREDENTIAL_CHARS) {
      throw PlatformError.unauthenticated("missing or invalid credential", AuthReason.invalidCredentials);
    }
    if (looksLikeApiKey(token)) return this.apiKeys.verify(token, requiredEnv);
    return this.jwt.verify(token);
  }

  verifyJwt(token: string): Promise<AuthContext> {
    return this.jwt.verify(stripBearer(token));
  }

  verifyApiKey(raw: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    return this.apiKeys.verify(stripBearer(raw), requiredEnv);
  }
}
