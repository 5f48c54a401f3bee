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

// The platform's one UUID check, here for identity's many callers.
export { isUuid } from "@platform/errors";
