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

/**
 * What the last character of a segment may be when the segment's length
 * leaves a partial group (index: length % 4): the bits it carries beyond the
 * last whole byte must be zero, or the segment decodes to the same bytes as
 * its canonical form. 2 characters carry 12 bits for one byte (4 spare),
 * 3 carry 18 for two (2 spare).
 */
const CANONICAL_TAIL: readonly (RegExp | undefined)[] = [undefined, undefined, /[AQgw]$/, /[AEIMQUYcgkosw048]$/];

/**
 * A base64url segment without padding whose decoding encodes back to itself
 * (no stray trailing bits). Decided from its alphabet, its length and its
 * last character: the decode and re-encode it stands for cost ~10 us of a
 * ~1 KB token on every verification (packages/bench/ANALYSIS.md, VerifyToken).
 */
export function isCanonicalBase64url(segment: string): boolean {
  const rest = segment.length % 4;
  if (rest === 1 || !BASE64URL.test(segment)) return false;
  return CANONICAL_TAIL[rest]?.test(segment) ?? true;
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
