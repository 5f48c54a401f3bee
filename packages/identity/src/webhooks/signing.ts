import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const PREFIX = "whsec_";

/** A new signing secret: `whsec_` + base64 of 32 random bytes (Standard Webhooks' form). */
export function newWebhookSecret(): string {
  return PREFIX + randomBytes(32).toString("base64");
}

/** The key bytes of a `whsec_` secret. */
export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, "base64");
}

/**
 * Standard Webhooks' v1 signature: base64 HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{body}` under the secret's key. Several
 * secrets (a rotation's overlap) give several space-separated signatures.
 */
export function signatureHeader(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const content = `${id}.${timestampSeconds}.${body}`;
  return secrets.map((s) => `v1,${createHmac("sha256", secretKey(s)).update(content).digest("base64")}`).join(" ");
}

/** Whether `header` holds a valid v1 signature by `secret` (for tests and the README's receiver). */
export function hasValidSignature(secret: string, header: string, id: string, timestampSeconds: number, body: string) {
  const want = Buffer.from(signatureHeader([secret], id, timestampSeconds, body));
  return header.split(" ").some((s) => {
    const got = Buffer.from(s);
    return got.length === want.length && timingSafeEqual(got, want);
  });
}
