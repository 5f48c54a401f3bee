import { createHash, hkdfSync } from "node:crypto";
import { open, seal } from "@platform/credentials";

/**
 * How an Idempotency-Key record is kept at rest. A stored response may hold
 * a secret shown once (CreateAPIKey's raw_key), so it is sealed with
 * AES-256-GCM under a key derived with HKDF-SHA256 from the KEK and the
 * caller's scope and Idempotency-Key, and the key itself is stored only as
 * its SHA-256: a database dump without the KEK yields neither the response
 * nor the Idempotency-Key needed to derive its key, and a stolen
 * Idempotency-Key is useless without both the KEK and the caller's
 * credential. The AAD binds a ciphertext to its row and method.
 */
const INFO_PREFIX = "identity/idempotency-response/v1";

/** The stored form of an Idempotency-Key (the `key` column). */
export function keyDigest(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

function responseKey(kek: Buffer, scope: string, key: string): Buffer {
  return Buffer.from(hkdfSync("sha256", kek, Buffer.alloc(0), `${INFO_PREFIX}\0${scope}\0${key}`, 32));
}

const aadOf = (scope: string, key: string, method: string) => `${scope}\0${keyDigest(key)}\0${method}`;

export function sealResponse(kek: Buffer, scope: string, key: string, method: string, response: Uint8Array): Buffer {
  return seal(responseKey(kek, scope, key), Buffer.from(response), aadOf(scope, key, method));
}

/** Throws when the record was not sealed for this scope, key and method (or under another KEK). */
export function openResponse(kek: Buffer, scope: string, key: string, method: string, sealed: Uint8Array): Uint8Array {
  return open(responseKey(kek, scope, key), sealed, aadOf(scope, key, method));
}
