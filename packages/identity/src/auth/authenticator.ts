import { type BearerCredential, parseCredentialField } from "@platform/credentials";
import { AuthReason, PlatformError } from "@platform/errors";
import type { ApiKeys } from "../api-keys/api-keys.ts";
import type { JwtService } from "../tokens/jwt-service.ts";
import type { AuthContext, KeyEnv } from "./auth-context.ts";

/**
 * The credential of a Verify RPC's field: exactly a compact JWS or an API key,
 * bare or as the exact `Bearer <token>` header value (@platform/credentials).
 * Padding, whitespace or any other variant is `invalid_credentials`.
 */
export function credentialOf(value: string): BearerCredential {
  const parsed = parseCredentialField(value);
  if (!parsed.ok) throw PlatformError.unauthenticated("missing or invalid credential", AuthReason.invalidCredentials);
  return parsed.credential;
}

/**
 * Resolves any bearer credential: the API key format is an API key, the
 * compact JWS a JWT, anything else is refused before any lookup. The same logic backs VerifyToken and the
 * REST middleware.
 */
export class Authenticator {
  constructor(
    private readonly jwt: JwtService,
    private readonly apiKeys: ApiKeys,
  ) {}

  // verifyToken and verifyApiKey hand back the verifier's own promise (a refusal of the field as a
  // rejected one): an async wrapper returning it made one more promise and two more turns a call.
  verifyToken(value: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    // A token verified before and still cached is a compact JWS: the cache answers before the field's
    // shape checks (a regex and every segment's canonical base64url test, ~7 us a call).
    const known = this.jwt.verifyCached(value);
    if (known) return known;
    try {
      const { token, kind } = credentialOf(value);
      return kind === "api_key" ? this.apiKeys.verify(token, requiredEnv) : this.jwt.verify(token);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async verifyJwt(value: string): Promise<AuthContext> {
    const { token, kind } = credentialOf(value);
    if (kind !== "jwt") throw PlatformError.unauthenticated("not a JWT", AuthReason.invalidCredentials);
    return this.jwt.verify(token);
  }

  verifyApiKey(value: string, requiredEnv?: KeyEnv): Promise<AuthContext> {
    try {
      const { token, kind } = credentialOf(value);
      if (kind !== "api_key") throw PlatformError.unauthenticated("not an API key", AuthReason.invalidCredentials);
      return this.apiKeys.verify(token, requiredEnv);
    } catch (err) {
      return Promise.reject(err);
    }
  }
}
