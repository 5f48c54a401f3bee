import { type CredentialKind, credentialKind } from "./credential-shape.ts";

export type BearerCredential = { token: string; kind: CredentialKind };

export type ParsedAuthorization =
  | { ok: true; credential: BearerCredential }
  | { ok: false; problem: "missing" | "malformed" };

// RFC 7235 §2.1: the scheme is case-insensitive; RFC 6750 §2.1: one SP, then
// the token. Nothing else is accepted: no second space, no tab, no padding.
const SCHEME = "bearer ";

/**
 * `Authorization: Bearer <token>`, the token exactly a compact JWS or an API
 * key. (HTTP itself drops whitespace around a header value, RFC 9110 §5.5,
 * so `Bearer <token> ` on the wire arrives here without it.)
 */
export function parseAuthorization(header: string | null | undefined): ParsedAuthorization {
  if (header === null || header === undefined || header === "") return { ok: false, problem: "missing" };
  if (header.length <= SCHEME.length || header.slice(0, SCHEME.length).toLowerCase() !== SCHEME)
    return { ok: false, problem: "malformed" };
  return credentialOf(header.slice(SCHEME.length));
}

/**
 * A credential passed as a value (identity's VerifyToken/VerifyJWT fields):
 * the token itself, or the exact `Bearer <token>` header form.
 */
export function parseCredentialField(value: string): ParsedAuthorization {
  if (value === "") return { ok: false, problem: "missing" };
  if (value.slice(0, SCHEME.length).toLowerCase() === SCHEME) return parseAuthorization(value);
  return credentialOf(value);
}

function credentialOf(token: string): ParsedAuthorization {
  const kind = credentialKind(token);
  return kind ? { ok: true, credential: { token, kind } } : { ok: false, problem: "malformed" };
}
