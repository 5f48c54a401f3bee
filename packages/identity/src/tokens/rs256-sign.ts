import { type KeyObject, sign } from "node:crypto";

const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");

/**
 * A compact RS256 JWS of `payload`, as jose's SignJWT writes it (the same
 * bytes for the same header and claims: RSASSA-PKCS1-v1_5 is deterministic).
 * Every login signs one: jose signs through WebCrypto, whose job, CryptoKey
 * and claim builder cost the event loop ~0.1 ms more CPU a token than
 * node:crypto's sign with the KeyObject already at hand; the RSA operation
 * still runs on libuv's threadpool (the callback form), off the event loop.
 */
export function signRs256(header: { kid: string; typ: "JWT" }, payload: object, key: KeyObject): Promise<string> {
  const input = `${part({ alg: "RS256", ...header })}.${part(payload)}`;
  return new Promise((resolve, reject) =>
    sign("sha256", Buffer.from(input), key, (err, signature) =>
      err ? reject(err) : resolve(`${input}.${signature.toString("base64url")}`),
    ),
  );
}
