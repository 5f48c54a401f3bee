import assert from "node:assert/strict";
import { test } from "node:test";
import { LOGIN_THROTTLE_DEFAULTS } from "../config/settings.ts";
import { clientAddress } from "./client-address.ts";
import { LoginThrottle } from "./login-throttle.ts";

test("memory stays bounded however many emails and addresses an attacker rotates through", () => {
  const throttle = new LoginThrottle({ ...LOGIN_THROTTLE_DEFAULTS, maxEntries: 100 });
  for (let i = 0; i < 20_000; i++)
    throttle.begin(`victim-${i}@example.com`, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  assert.deepEqual(throttle.size, { accounts: 100, addresses: 100 });
});

test("the account key is lower(email); a success clears it", () => {
  let now = 0;
  const throttle = new LoginThrottle(
    { ...LOGIN_THROTTLE_DEFAULTS, accountFreeFailures: 1, baseDelayMs: 1000 },
    () => new Date(now),
  );
  throttle.begin("Owner@Example.com", undefined);
  throttle.begin("owner@example.COM", undefined);
  assert.throws(() => throttle.begin("OWNER@EXAMPLE.COM", undefined), /too many failed logins/);
  now += 1000;
  throttle.succeeded(throttle.begin("owner@example.com", undefined));
  throttle.begin("owner@example.com", undefined);
  throttle.begin("owner@example.com", undefined);
});

test("X-Forwarded-For counts only behind a trusted proxy, and only the entry that proxy wrote", () => {
  assert.equal(clientAddress("::ffff:127.0.0.1", "203.0.113.9", 0), "127.0.0.1");
  assert.equal(clientAddress("10.0.0.2", "203.0.113.9", 1), "203.0.113.9");
  // The client prepended a forged entry; the proxy appended what it saw.
  assert.equal(clientAddress("10.0.0.2", "198.51.100.1, 203.0.113.9", 1), "203.0.113.9");
  assert.equal(clientAddress("10.0.0.2", "198.51.100.1, 203.0.113.9, 10.0.0.1", 2), "203.0.113.9");
  assert.equal(clientAddress("10.0.0.2", "not-an-address", 1), "10.0.0.2");
  assert.equal(clientAddress("10.0.0.2", null, 1), "10.0.0.2");
});
