import type { ServiceImpl } from "@connectrpc/connect";
import type { KeyPublicationService } from "@platform/gen/identity/v1/keys_pb";
import type { Identity } from "../identity.ts";
import { ISSUER } from "../tokens/jwt-service.ts";

/** Keys change on rotation only; verifiers may cache the set a few minutes. */
const CACHE = "public, max-age=300";

export function keyPublicationService(identity: Identity): Partial<ServiceImpl<typeof KeyPublicationService>> {
  return {
    getJwks: async (_req, ctx) => {
      ctx.responseHeader.set("cache-control", CACHE);
      const keys = await identity.keys.published();
      return {
        keys: keys.map((k) => {
          const jwk = k.key.export({ format: "jwk" }) as { n: string; e: string };
          return { kty: "RSA", kid: k.kid, use: "sig", alg: "RS256", n: jwk.n, e: jwk.e };
        }),
      };
    },
    getOpenIdConfiguration: async (_req, ctx) => {
      ctx.responseHeader.set("cache-control", CACHE);
      // The REST listener's own URL unless IDENTITY_PUBLIC_URL names the one outside verifiers use
      // (a client's Host header never makes it in: it is the client's to write).
      const base = identity.publicUrl ?? "";
      return {
        issuer: ISSUER,
        jwksUri: `${base}/.well-known/jwks.json`,
        tokenEndpoint: `${base}/v1/auth/login`,
        idTokenSigningAlgValuesSupported: ["RS256"],
        subjectTypesSupported: ["public"],
        responseTypesSupported: ["token"],
        claimsSupported: ["iss", "sub", "aud", "iat", "nbf", "exp", "jti", "org_id", "env", "scope"],
      };
    },
  };
}
