import assert from "node:assert/strict";
import { test } from "node:test";
import { base62, base62Uint32 } from "../crypto/base62.ts";
import { crc32 } from "../crypto/crc32.ts";
import { generateApiKey, looksLikeApiKey, parseApiKey } from "./api-key-format.ts";

test("crc32 matches the IEEE check value", () => {
  assert.equal(crc32("123456789"), 0xcbf43926);
  assert.equal(crc32(""), 0);
});

test("keys: sk_<env>_ + 43 base62 secret + 6 base62 CRC32; key_prefix is a display prefix of the raw key", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const env = i % 2 ? "live" : "test";
    const k = generateApiKey(env);
    assert.match(k.raw, new RegExp(`^sk_${env}_[0-9A-Za-z]{49}$`));
    assert.ok(k.raw.startsWith(k.keyPrefix));
    assert.equal(k.keyPrefix.length, `sk_${env}_`.length + 8);
    assert.deepEqual(parseApiKey(k.raw), { env, keyPrefix: k.keyPrefix });
    assert.ok(looksLikeApiKey(k.raw));
    seen.add(k.raw);
  }
  assert.equal(seen.size, 200);
});

test("any single-character change or truncation fails the checksum", () => {
  const { raw } = generateApiKey("live");
  assert.equal(parseApiKey(raw.slice(0, -1)), undefined);
  assert.equal(parseApiKey(`${raw}a`), undefined);
  assert.equal(parseApiKey(raw.replace("sk_live_", "sk_test_")), undefined);
  for (let i = 8; i < raw.length; i += 5) {
    const c = raw[i] === "a" ? "b" : "a";
    assert.equal(parseApiKey(raw.slice(0, i) + c + raw.slice(i + 1)), undefined, `position ${i}`);
  }
  assert.equal(parseApiKey(""), undefined);
  assert.equal(parseApiKey("sk_prod_abc"), undefined);
});

test("the checksum is computed in plain numbers: the same digits as base62 of the CRC's bytes, no Buffer or BigInt a key", () => {
  for (const n of [0, 1, 61, 62, 0xffffffff, 0x80000000, 123456789, 0xcbf43926])
    assert.equal(base62Uint32(n, 6), base62(Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff), 6));
  // Non-ASCII text is still checksummed over its UTF-8 bytes.
  assert.equal(crc32("ü日\u{1F600}"), crc32(Buffer.from("ü日\u{1F600}", "utf8")));
  const { raw } = generateApiKey("live");
  const from = Buffer.from;
  const big = globalThis.BigInt;
  let calls = 0;
  Buffer.from = ((...args: Parameters<typeof from>) => (calls++, from(...args))) as typeof from;
  globalThis.BigInt = ((v: Parameters<typeof big>[0]) => (calls++, big(v))) as typeof big;
  try {
    assert.ok(parseApiKey(raw));
  } finally {
    Buffer.from = from;
    globalThis.BigInt = big;
  }
  assert.equal(calls, 0, "Buffer.from or BigInt called while verifying a key's checksum");
});
