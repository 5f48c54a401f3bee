import { hash, randomBytes } from "node:crypto";
import { base62 } from "./base62.ts";

/** SHA-256 of a secret token: the only form in which tokens and keys are stored (one call: no Hash object). */
export function sha256(text: string): Buffer {
  return hash("sha256", text, "buffer");
}

/** sha256(text) in hex, in one call (no Hash object, no Buffer): how the caches key a token. */
export function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}

/** `bytes` of CSPRNG output in base62 (fixed width, so lengths do not leak). */
export function randomBase62(bytes: number): string {
  return base62(randomBytes(bytes), Math.ceil((bytes * 8) / Math.log2(62)));
}

// The platform's one UUID check, here for identity's many callers.
export { isUuid } from "@platform/errors";
