import { createHash, randomBytes } from "node:crypto";
import { base62 } from "./base62.ts";

/** SHA-256 of a secret token: the only form in which tokens and keys are stored. */
export function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** `bytes` of CSPRNG output in base62 (fixed width, so lengths do not leak). */
export function randomBase62(bytes: number): string {
  return base62(randomBytes(bytes), Math.ceil((bytes * 8) / Math.log2(62)));
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID_RE.test(s);
