// Security suite: forged and tampered JWTs, every one rejected with the
// specification's reason. The REST half (hostile input on every endpoint,
// secrets in responses and logs) is in server/rest-security.db.test.ts.
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { AuthReason, PlatformError } from "@platform/errors";
import { SignJWT } from "jose";
import { type Fixture, createFixture } from "./testing/fixture.ts";

let f: Fixture;
let u: Awaited<ReturnType<Fixture["seedUser"]>>;
before(async () => {
  f = await createFixture();
  u = await f.seedUser();
});
after(() => f.close());

const b64 = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

async function rejected(token: string, reason: string) {
  const err = await f.identity.authenticator.verifyToken(token).then(
    () => assert.fail(`accepted; expected ${reason}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PlatformError, String(err));
  assert.equal(err.code, 16);
  assert.equal(err.reason, reason, err.message);
}

function claims(over: Record<string, unknown> = {}) {
  const iat = Math.floor(Date.now() / 1000);
  return {
    iss: "identity.platform",
    sub: u.user.id,
    aud: ["agents", "identity"],
    iat,
    nbf: iat,
    exp: iat + 600,
    jti: randomUUID(),
    org_id: u.orgId,
    env: "test",
    scope: "default",
    ...over,
  };
}

async function signWithActive(payload: Record<string, unknown>, header: Record<string, unknown> = {}) {
  const { kid, privateKey } = await f.identity.keys.active();
  return new SignJWT(payload).setProtectedHeader({ alg: "RS256", typ: "JWT", kid, ...header }).sign(privateKey);
}

describe("forged JWTs", () => {
  test("a properly signed token passes (the control)", async () => {
    const ctx = await f.identity.authenticator.verifyToken(await signWithActive(claims()));
    assert.equal(ctx.userId, u.user.id);
  });

  test("alg none", async () => {
    const kid = await f.identity.keys.ensureActiveKey();
    await rejected(`${b64({ alg: "none", typ: "JWT", kid })}.${b64(claims())}.`, AuthReason.invalidCredentials);
    await rejected(`${b64({ alg: "none", typ: "JWT", kid })}.${b64(claims())}`, AuthReason.invalidCredentials);
    await rejected(`${b64({ alg: "NONE", kid })}.${b64(claims())}.`, AuthReason.invalidCredentials);
  });

  test("HS256 signed with the RSA public key as the HMAC secret", async () => {
    const kid = await f.identity.keys.ensureActiveKey();
    const key = await f.identity.keys.find(kid);
    const pem = key!.key.export({ type: "spki", format: "pem" }).toString();
    for (const secret of [pem, key!.der]) {
      const input = `${b64({ alg: "HS256", typ: "JWT", kid })}.${b64(claims())}`;
      const sig = createHmac("sha256", secret).update(input).digest("base64url");
      await rejected(`${input}.${sig}`, AuthReason.invalidCredentials);
    }
  });

  test("wrong iss or aud", async () => {
    await rejected(await signWithActive(claims({ iss: "evil.example" })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ iss: undefined })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ aud: ["billing"] })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ aud: undefined })), AuthReason.invalidCredentials);
  });

  test("expired", async () => {
    const iat = Math.floor(Date.now() / 1000) - 7200;
    await rejected(await signWithActive(claims({ iat, nbf: iat, exp: iat + 60 })), AuthReason.expired);
  });

  test("nbf in the future", async () => {
    const now = Math.floor(Date.now() / 1000);
    await rejected(await signWithActive(claims({ nbf: now + 3600, exp: now + 7200 })), AuthReason.invalidCredentials);
  });

  test("tampered payload (another org, another user) with the original signature", async () => {
    const good = await signWithActive(claims());
    const [h, , s] = good.split(".");
    const other = await f.seedUser();
    await rejected(`${h}.${b64(claims({ org_id: other.orgId }))}.${s}`, AuthReason.invalidCredentials);
    await rejected(
      `${h}.${b64(claims({ sub: other.user.id, org_id: other.orgId }))}.${s}`,
      AuthReason.invalidCredentials,
    );
    // A flipped signature byte.
    const flipped = s!.startsWith("A") ? `B${s!.slice(1)}` : `A${s!.slice(1)}`;
    await rejected(`${h}.${good.split(".")[1]}.${flipped}`, AuthReason.invalidCredentials);
  });

  test("missing claims, wrong scope, env or ids", async () => {
    await rejected(await signWithActive(claims({ jti: undefined })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ scope: "admin" })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ env: "prod" })), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims({ sub: "not-a-uuid" })), AuthReason.invalidCredentials);
  });

  test("unknown kid", async () => {
    await rejected(await signWithActive(claims(), { kid: randomUUID() }), AuthReason.invalidCredentials);
    await rejected(await signWithActive(claims(), { kid: undefined }), AuthReason.invalidCredentials);
  });

  test("retired kid, even with a valid signature and unexpired claims", async () => {
    const token = await signWithActive(claims());
    await f.identity.authenticator.verifyToken(token);
    await f.identity.keys.rotate();
    await rejected(token, AuthReason.keyRetired);
  });
});
