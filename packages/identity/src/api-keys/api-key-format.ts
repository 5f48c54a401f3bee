import { base62Uint32, isBase62 } from "../crypto/base62.ts";
import { crc32 } from "../crypto/crc32.ts";
import { randomBase62 } from "../crypto/hash.ts";
import type { KeyEnv } from "../auth/auth-context.ts";

// sk_<env>_<secret: 43 base62 chars = 256 bits><checksum: 6 base62 chars of CRC32(prefix+secret)>
const SECRET_CHARS = 43;
const CHECKSUM_CHARS = 6;
/** Secret characters shown in key_prefix: enough to tell keys apart, far too few to guess the rest. */
const DISPLAY_CHARS = 8;
const FORMAT = /^sk_(live|test)_([0-9A-Za-z]+)$/;

export type GeneratedKey = { raw: string; keyPrefix: string; env: KeyEnv };

function checksum(body: string): string {
  return base62Uint32(crc32(body), CHECKSUM_CHARS);
}

/** A new high-entropy key with environment prefix and CRC32 checksum (design.md). */
export function generateApiKey(env: KeyEnv): GeneratedKey {
  const body = `sk_${env}_${randomBase62(32).slice(-SECRET_CHARS)}`;
  const raw = body + checksum(body);
  return { raw, keyPrefix: raw.slice(0, `sk_${env}_`.length + DISPLAY_CHARS), env };
}

/**
 * Checks the shape and checksum without touching the database, so typos and
 * random guesses are rejected cheaply. Returns the key's env, or undefined.
 */
export function parseApiKey(raw: string): { env: KeyEnv; keyPrefix: string } | undefined {
  const m = FORMAT.exec(raw);
  if (!m) return undefined;
  const env = m[1] as KeyEnv;
  const rest = m[2]!;
  if (rest.length !== SECRET_CHARS + CHECKSUM_CHARS || !isBase62(rest)) return undefined;
  const body = raw.slice(0, raw.length - CHECKSUM_CHARS);
  if (checksum(body) !== raw.slice(-CHECKSUM_CHARS)) return undefined;
  return { env, keyPrefix: raw.slice(0, `sk_${env}_`.length + DISPLAY_CHARS) };
}

export const looksLikeApiKey = (token: string): boolean => token.startsWith("sk_live_") || token.startsWith("sk_test_");
