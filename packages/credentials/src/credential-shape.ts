/**
 * The exact shapes of the platform's two bearer credentials. Anything else
 * (padding, whitespace, a non-canonical base64url encoding, a fourth part)
 * is not a credential: JWT libraries and base64 decoders tolerate such
 * variants, so without this check several strings would verify as one token
 * and slip past anything keyed on the token string (caches, deny lists, logs).
 */

/** Longer credentials are refused before any parsing (a JWT here is ~1 KB). */
export const MAX_CREDENTIAL_CHARS = 8192;

// sk_<env>_ + 43 base62 secret characters + 6 base62 checksum characters
// (identity's api-key-format.ts makes and checks the checksum).
const API_KEY = /^sk_(?:live|test)_[0-9A-Za-z]{49}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export type CredentialKind = "jwt" | "api_key";

/** A base64url segment without padding whose decoding encodes back to itself (no stray trailing bits). */
function isCanonicalBase64url(segment: string): boolean {
  if (!BASE64URL.test(segment) || segment.length % 4 === 1) return false;
  return Buffer.from(segment, "base64url").toString("base64url") === segment;
}

/** JWS compact serialization: exactly three non-empty canonical base64url parts. */
export function isCompactJws(token: string): boolean {
  if (token.length > MAX_CREDENTIAL_CHARS) return false;
  const parts = token.split(".");
  return parts.length === 3 && parts.every(isCanonicalBase64url);
}

/** Whether `token` has the exact shape of a platform API key (prefix, length, alphabet); says nothing of its validity. */
export function isApiKeyFormat(token: string): boolean {
  return API_KEY.test(token);
}

/** Which credential `token` is shaped as, or undefined when it is neither exactly. */
export function credentialKind(token: string): CredentialKind | undefined {
  if (isApiKeyFormat(token)) return "api_key";
  if (isCompactJws(token)) return "jwt";
  return undefined;
}
