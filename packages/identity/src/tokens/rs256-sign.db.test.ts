import assert from "node:assert/strict";
import { webcrypto } from "node:crypto";
import { after, before, test } from "node:test";
import { decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import { type Fixture, createFixture } from "../testing/fixture.ts";
import { AUDIENCE, ISSUER, SCOPE } from "./jwt-service.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

test("an access token is signed with node:crypto, not WebCrypto, and is byte for byte what jose's SignJWT makes", async () => {
  const u = await f.seedUser();
  // jose signs through the global WebCrypto, which is node:crypto's.
  const subtle = webcrypto.subtle;
  const webCryptoSign = subtle.sign;
  let webCryptoSigns = 0;
  subtle.sign = function (this: webcrypto.SubtleCrypto, ...args: Parameters<webcrypto.SubtleCrypto["sign"]>) {
    webCryptoSigns++;
    return webCryptoSign.apply(this, args);
  };
  let issued: Awaited<ReturnType<typeof f.identity.jwt.issue>>;
  try {
    issued = await f.identity.jwt.issue(u.user.id, u.orgId, 600);
  } finally {
    subtle.sign = webCryptoSign;
  }
  assert.equal(webCryptoSigns, 0, "a login's signature does not go through WebCrypto");

  // RSASSA-PKCS1-v1_5 is deterministic: the same header and claims give the same token.
  const claims = decodeJwt(issued.token);
  const { privateKey } = await f.identity.keys.active();
  const expected = await new SignJWT({ org_id: u.orgId, env: "test", scope: SCOPE })
    .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: issued.kid })
    .setIssuer(ISSUER)
    .setSubject(u.user.id)
    .setAudience(AUDIENCE)
    .setIssuedAt(claims.iat!)
    .setNotBefore(claims.iat!)
    .setExpirationTime(claims.iat! + 600)
    .setJti(issued.jti)
    .sign(privateKey);
  assert.equal(issued.token, expected);
  assert.deepEqual(decodeProtectedHeader(issued.token), { alg: "RS256", typ: "JWT", kid: issued.kid });
  const ctx = await f.identity.jwt.verify(issued.token);
  assert.deepEqual([ctx.userId, ctx.orgId, ctx.env], [u.user.id, u.orgId, "test"]);
});
