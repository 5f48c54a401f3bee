import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { parseAuthorization, parseCredentialField } from "./authorization.ts";
import { credentialKind, isCompactJws } from "./credential-shape.ts";

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
// A JWS-shaped token whose signature (256 bytes, like RS256) has a 2-character tail group.
const jwt = `${b64({ alg: "RS256", typ: "JWT", kid: "k" })}.${b64({ sub: "u" })}.${randomBytes(256).toString("base64url")}`;
const apiKey = `sk_live_${"A1b2C3d4E5".repeat(4)}abc${"Zz9Zz9"}`;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/** The same bytes with the last character's unused low bit set: decoders accept it, it is not canonical. */
const strayBits = (segment: string) => segment.slice(0, -1) + ALPHABET[ALPHABET.indexOf(segment.at(-1)!) | 1];

/** Every loose variant of a good token that the issue names, and a few more. */
function looseVariants(token: string): [string, string][] {
  const [h, p, sig] = token.split(".");
  const mid = Math.floor(token.length / 2);
  const variants: [string, string][] = [
    ["leading space", ` ${token}`],
    ["trailing space", `${token} `],
    ["leading tab", `\t${token}`],
    ["trailing newline", `${token}\n`],
    ["tab inside", `${token.slice(0, mid)}\t${token.slice(mid)}`],
    ["newline inside", `${token.slice(0, mid)}\n${token.slice(mid)}`],
    ["space inside", `${token.slice(0, mid)} ${token.slice(mid)}`],
    ["NUL appended", `${token}\u0000`],
  ];
  if (sig !== undefined) {
    variants.push(
      ["padding on the signature", `${token}==`],
      ["one = of padding", `${token}=`],
      ["tab inside the signature", `${h}.${p}.${sig.slice(0, 10)}\t${sig.slice(10)}`],
      ["standard base64 alphabet", `${h}.${p}.${sig.replaceAll("-", "+").replaceAll("_", "/")}+/`],
      ["four parts", `${token}.${sig}`],
      ["empty signature", `${h}.${p}.`],
      ["empty payload", `${h}..${sig}`],
      ["non-canonical last character (stray bits)", `${h}.${p}.${strayBits(sig)}`],
      ["impossible length", `${h}.${p}.${sig}AAA`],
    );
  } else {
    variants.push(
      ["one more character", `${token}A`],
      ["one less character", token.slice(0, -1)],
      ["uppercase prefix", token.replace("sk_live_", "SK_LIVE_")],
    );
  }
  return variants;
}

test("the exact compact JWS and the exact API key format are credentials", () => {
  assert.equal(
    Buffer.from(strayBits(jwt.split(".")[2]!), "base64url").toString("hex"),
    Buffer.from(jwt.split(".")[2]!, "base64url").toString("hex"),
  );
  assert.equal(credentialKind(jwt), "jwt");
  assert.equal(credentialKind(apiKey), "api_key");
  assert.ok(isCompactJws("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"));
});

test("every loose variant of a JWT or an API key is refused", () => {
  for (const token of [jwt, apiKey]) {
    for (const [what, variant] of looseVariants(token)) {
      assert.equal(credentialKind(variant), undefined, `${what}: ${JSON.stringify(variant.slice(-12))}`);
      assert.deepEqual(parseCredentialField(variant), { ok: false, problem: "malformed" }, what);
      assert.deepEqual(parseAuthorization(`Bearer ${variant}`), { ok: false, problem: "malformed" }, what);
    }
  }
});

test("Authorization: the scheme in any case, exactly one space, then the token", () => {
  for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
    assert.deepEqual(
      parseAuthorization(`${scheme} ${jwt}`),
      { ok: true, credential: { token: jwt, kind: "jwt" } },
      scheme,
    );
    assert.deepEqual(
      parseAuthorization(`${scheme} ${apiKey}`),
      { ok: true, credential: { token: apiKey, kind: "api_key" } },
      scheme,
    );
  }
  for (const header of [
    `Bearer  ${jwt}`,
    `Bearer\t${jwt}`,
    ` Bearer ${jwt}`,
    `Bearer${jwt}`,
    `Basic ${jwt}`,
    `Token ${jwt}`,
    jwt,
    "Bearer",
    "Bearer ",
    `Bearer ${jwt} ${jwt}`,
  ]) {
    assert.deepEqual(
      parseAuthorization(header),
      { ok: false, problem: "malformed" },
      JSON.stringify(header.slice(0, 12)),
    );
  }
  for (const header of [null, undefined, ""])
    assert.deepEqual(parseAuthorization(header), { ok: false, problem: "missing" });
});

test("a credential field takes the token or the exact header form", () => {
  assert.deepEqual(parseCredentialField(jwt), { ok: true, credential: { token: jwt, kind: "jwt" } });
  assert.deepEqual(parseCredentialField(`bearer ${apiKey}`), {
    ok: true,
    credential: { token: apiKey, kind: "api_key" },
  });
  assert.deepEqual(parseCredentialField(`Bearer  ${jwt}`), { ok: false, problem: "malformed" });
  assert.deepEqual(parseCredentialField(""), { ok: false, problem: "missing" });
  assert.equal(parseCredentialField("x".repeat(9000)).ok, false);
});
