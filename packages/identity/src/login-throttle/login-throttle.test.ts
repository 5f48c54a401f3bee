import assert from "node:assert/strict";
import { test } from "node:test";
import { LOGIN_THROTTLE_DEFAULTS } from "../config/settings.ts";
import { clientAddress, TrustedProxies } from "./client-address.ts";
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

test("X-Forwarded-For from a trusted proxy address (LOGIN_TRUSTED_PROXIES): believed from it only", () => {
  const router = new TrustedProxies(["127.0.0.1", "::1", "10.1.0.0/16"]);
  // The router's connection: what it wrote is the client.
  assert.equal(clientAddress("127.0.0.1", "127.0.0.2", 0, router), "127.0.0.2");
  assert.equal(clientAddress("::ffff:127.0.0.1", "203.0.113.9", 0, router), "203.0.113.9");
  assert.equal(clientAddress("::1", "2001:db8::7", 0, router), "2001:db8::7");
  assert.equal(clientAddress("10.1.4.5", "203.0.113.9", 0, router), "203.0.113.9");
  // Trusted hops are skipped from the right; the first other address is the client, a forged entry to its left is not.
  assert.equal(clientAddress("127.0.0.1", "198.51.100.1, 203.0.113.9, 10.1.0.9", 0, router), "203.0.113.9");
  // Any other peer's header is ignored: its own address counts.
  assert.equal(clientAddress("127.0.0.5", "203.0.113.9", 0, router), "127.0.0.5");
  assert.equal(clientAddress("10.2.0.1", "203.0.113.9", 0, router), "10.2.0.1");
  // Not an address: the proxy's own peer address.
  assert.equal(clientAddress("127.0.0.1", "not-an-address", 0, router), "127.0.0.1");
  assert.equal(clientAddress("127.0.0.1", null, 0, router), "127.0.0.1");
  // None trusted (the default): as before.
  assert.equal(clientAddress("127.0.0.1", "203.0.113.9", 0, new TrustedProxies([])), "127.0.0.1");
  assert.throws(() => new TrustedProxies(["router"]), /not an IP address or CIDR/);
  assert.throws(() => new TrustedProxies(["10.0.0.0/40"]), /not an IP address or CIDR/);
});
