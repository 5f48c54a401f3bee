import assert from "node:assert/strict";
import { test } from "node:test";
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
