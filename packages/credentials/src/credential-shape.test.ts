import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { isCanonicalBase64url } from "./credential-shape.ts";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** The definition: unpadded base64url that decodes and encodes back to itself. */
function byRoundTrip(segment: string): boolean {
  if (segment === "" || !/^[A-Za-z0-9_-]+$/.test(segment) || segment.length % 4 === 1) return false;
  return Buffer.from(segment, "base64url").toString("base64url") === segment;
}

test("the shortcut agrees with decode-and-re-encode on every segment of up to 3 characters", () => {
  // Every character of the alphabet plus a few outside it (padding, standard base64, space).
  const chars = [...ALPHABET, "=", "+", "/", " "];
  let canonical = 0;
  const check = (s: string) => {
    const expected = byRoundTrip(s);
    assert.equal(isCanonicalBase64url(s), expected, JSON.stringify(s));
    if (expected) canonical++;
  };
  for (const a of chars) {
    check(a);
    for (const b of chars) {
      check(a + b);
      for (const c of chars) check(a + b + c);
    }
  }
  // 2 characters: 64 first × 4 zero-tailed last; 3 characters: 64 × 64 × 16.
  assert.equal(canonical, 64 * 4 + 64 * 64 * 16);
});

test("the shortcut agrees with decode-and-re-encode on long segments ending in every character", () => {
  for (let bytes = 1; bytes <= 300; bytes += 1) {
    const segment = randomBytes(bytes).toString("base64url");
    for (const last of ALPHABET) {
      const variant = segment.slice(0, -1) + last;
      assert.equal(isCanonicalBase64url(variant), byRoundTrip(variant), `${bytes} bytes, last ${last}`);
    }
    assert.equal(isCanonicalBase64url(`${segment}=`), false);
    assert.equal(isCanonicalBase64url(`${segment}A`), byRoundTrip(`${segment}A`));
  }
});

test("an empty segment is not base64url", () => {
  assert.equal(isCanonicalBase64url(""), false);
});
