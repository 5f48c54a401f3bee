// Network policy rules (issue 21): validation names the offending entry,
// size limits, name and CIDR matching, the special ranges, and the domain's
// create / update / list paths with a minimal driver and the memory stores.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import {
  cidrAllows,
  domainAllowed,
  type NetworkPolicy,
  POLICY_LIMITS,
  validateNetworkPolicy,
} from "@platform/network-policy";
import { type SandboxDriver, type SandboxObservation, zeroUsage } from "../driver.ts";
import { ComputeDomain } from "../service/compute-domain.ts";
import { MemoryNetworkEventStore } from "../store/network-event-store.ts";
import { MemorySandboxStore } from "../store/sandbox-store.ts";
import { canonicalAddress, explicitlyAllowed, isHostAddress, specialRange } from "./addresses.ts";

function rejects(fn: () => unknown, entry: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof PlatformError);
    assert.equal(err.code, Code.InvalidArgument);
    assert.ok(err.message.includes(entry), `${err.message} should name ${entry}`);
    return true;
  });
}

test("malformed domains and CIDRs are INVALID_ARGUMENT naming the entry", () => {
  for (const bad of [
    "exa mple.com",
    "*.com",
    "a..b",
    "-a.com",
    "*.*.a.com",
    "a.com/x",
    "1.2.3.4",
    "",
    "x".repeat(64) + ".com",
  ]) {
    rejects(() => validateNetworkPolicy({ allowedDomains: ["ok.example", bad] }), "allowed_domains[1]");
  }
  for (const bad of ["10.0.0.0/33", "10.0.0/8", "a.b.c.d/8", "::/129", "10.0.0.0/8/1", "10.0.0.0/-1", "example.com"]) {
    rejects(() => validateNetworkPolicy({ allowedCidrs: [{ cidr: "10.0.0.0/8" }, { cidr: bad }] }), "allowed_cidrs[1]");
  }
  rejects(() => validateNetworkPolicy({ allowedCidrs: [{ cidr: "10.0.0.0/8", ports: [0] }] }), "allowed_cidrs[0]");
  rejects(() => validateNetworkPolicy({ allowedCidrs: [{ cidr: "10.0.0.0/8", ports: [65536] }] }), "allowed_cidrs[0]");
});

test("a policy over the size limit is refused", () => {
  const domains = Array.from({ length: POLICY_LIMITS.maxDomains + 1 }, (_, i) => `h${i}.example.com`);
  rejects(() => validateNetworkPolicy({ allowedDomains: domains }), "allowed_domains");
  const cidrs = Array.from({ length: POLICY_LIMITS.maxCidrs + 1 }, (_, i) => ({ cidr: `203.0.${i % 256}.0/24` }));
  rejects(() => validateNetworkPolicy({ allowedCidrs: cidrs }), "allowed_cidrs");
  assert.equal(
    validateNetworkPolicy({ allowedDomains: domains.slice(1) }).allowedDomains.length,
    POLICY_LIMITS.maxDomains,
  );
});

test("names match exactly or below a wildcard; CIDRs by address and port", () => {
  const p = validateNetworkPolicy({
    allowedDomains: ["PyPI.org.", "*.github.com"],
    allowedCidrs: [{ cidr: "203.0.113.0/24", ports: [443] }, { cidr: "2001:db8::/32" }],
  });
  assert.deepEqual(p.allowedDomains, ["pypi.org", "*.github.com"]);
  assert.ok(domainAllowed(p, "pypi.org"));
  assert.ok(domainAllowed(p, "PYPI.ORG."));
  assert.ok(!domainAllowed(p, "files.pypi.org"));
  assert.ok(domainAllowed(p, "api.github.com"));
  assert.ok(domainAllowed(p, "a.b.github.com"));
  assert.ok(!domainAllowed(p, "github.com"));
  assert.ok(!domainAllowed(p, "evilgithub.com"));
  assert.ok(cidrAllows(p, "203.0.113.9", 443));
  assert.ok(!cidrAllows(p, "203.0.113.9", 80));
  assert.ok(!cidrAllows(p, "203.0.114.9", 443));
  assert.ok(cidrAllows(p, "2001:db8::1", 22));
});

test("loopback, private and link-local open only with a CIDR inside their range", () => {
  for (const a of [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "::1",
    "fe80::1",
    "fd00::1",
    "::ffff:127.0.0.1",
    "0.0.0.0",
  ]) {
    assert.ok(specialRange(a), a);
  }
  assert.equal(specialRange("198.18.0.2"), undefined);
  // Every spelling of an address is the same address.
  assert.equal(canonicalAddress("0:0:0:0:0:0:0:1"), "::1");
  assert.equal(canonicalAddress("::FFFF:127.0.0.1"), "127.0.0.1");
  assert.equal(canonicalAddress("0:0:0:0:0:ffff:7f00:1"), "127.0.0.1");
  assert.ok(isHostAddress("0:0:0:0:0:0:0:1"));
  assert.ok(isHostAddress("::ffff:7f00:1"));
  const wide: NetworkPolicy = validateNetworkPolicy({ allowedCidrs: [{ cidr: "0.0.0.0/0" }] });
  assert.ok(!explicitlyAllowed(wide, "10.1.2.3", 80));
  const narrow = validateNetworkPolicy({ allowedCidrs: [{ cidr: "10.1.0.0/16", ports: [8080] }] });
  assert.ok(explicitlyAllowed(narrow, "10.1.2.3", 8080));
  assert.ok(!explicitlyAllowed(narrow, "10.1.2.3", 80));
  assert.ok(!explicitlyAllowed(narrow, "10.2.0.1", 8080));
});

/** Just enough of a driver for the domain's policy paths; records what it was given. */
function policyDriver(): SandboxDriver & { given: Map<string, NetworkPolicy | undefined> } {
  const given = new Map<string, NetworkPolicy | undefined>();
  const ready: SandboxObservation = { phase: "ready" };
  return {
    name: "policy",
    given,
    async create(spec) {
      given.set(spec.sandboxId, spec.networkPolicy);
    },
    async recover() {
      return ready;
    },
    async observe() {
      return ready;
    },
    async waitSettled() {
      return ready;
    },
    onPhaseChange() {
      return () => {};
    },
    // biome-ignore lint/correctness/useYield: never asked to run commands here
    async *exec() {
      throw new Error("unused");
    },
    async readFile() {
      throw new Error("unused");
    },
    async writeFile() {
      return 0;
    },
    async listFiles() {
      return { entries: [], truncated: false };
    },
    async usage() {
      return zeroUsage();
    },
    async pause() {},
    async resume() {
      return ready;
    },
    async destroy() {
      return zeroUsage();
    },
    async collectGarbage() {
      return [];
    },
    async setNetworkPolicy(id, policy) {
      given.set(id, policy);
    },
    async close() {},
  };
}

test("the domain validates, stores and hands the policy to the driver; events page by token", async () => {
  const driver = policyDriver();
  const events = new MemoryNetworkEventStore();
  const store = new MemorySandboxStore();
  const domain = new ComputeDomain({
    driver,
    store,
    networkEvents: events,
    defaults: { image: "i", storageClass: "", workspaceSize: "5Gi" },
  });
  const base = { tenantId: randomUUID(), sessionId: randomUUID() };
  await assert.rejects(
    domain.createSandbox({ ...base, networkPolicy: { allowedDomains: ["bad domain"] } }),
    (e: PlatformError) => e.code === Code.InvalidArgument && e.message.includes("allowed_domains[0]"),
  );
  const none = await domain.createSandbox(base);
  assert.equal(driver.given.get(none.sandboxId), undefined);
  assert.equal((await domain.describeSandbox(none.sandboxId)).networkPolicy, undefined);
  const { sandboxId } = await domain.createSandbox({ ...base, networkPolicy: { allowedDomains: ["Example.COM"] } });
  assert.deepEqual(driver.given.get(sandboxId)?.allowedDomains, ["example.com"]);
  assert.deepEqual((await store.get(sandboxId))?.networkPolicy?.allowedDomains, ["example.com"]);
  await domain.updateNetworkPolicy(sandboxId, { allowAll: true });
  assert.equal(driver.given.get(sandboxId)?.allowAll, true);
  assert.equal((await domain.describeSandbox(sandboxId)).networkPolicy?.allowAll, true);
  await assert.rejects(
    domain.updateNetworkPolicy(sandboxId, { allowedCidrs: [{ cidr: "300.1.1.1/8" }] }),
    (e: PlatformError) => e.code === Code.InvalidArgument && e.message.includes("allowed_cidrs[0]"),
  );
  await domain.updateNetworkPolicy(sandboxId, undefined);
  assert.equal(driver.given.get(sandboxId), undefined);

  for (let seq = 1; seq <= 5; seq++) {
    await events.append({
      sandboxId,
      seq,
      at: new Date(),
      host: `h${seq}`,
      port: 443,
      address: "",
      allowed: false,
      reason: "not_allowed",
      protocol: "connect",
      egressBytes: 0,
      ingressBytes: 0,
      durationMs: 1,
    });
  }
  const page1 = await domain.listNetworkEvents(sandboxId, 2);
  assert.deepEqual(
    page1.events.map((e) => e.host),
    ["h1", "h2"],
  );
  const page2 = await domain.listNetworkEvents(sandboxId, 10, page1.nextPageToken);
  assert.deepEqual(
    page2.events.map((e) => e.host),
    ["h3", "h4", "h5"],
  );
  const page3 = await domain.listNetworkEvents(sandboxId, 10, page2.nextPageToken);
  assert.deepEqual(page3.events, []);
  assert.equal(page3.nextPageToken, page2.nextPageToken);
  await assert.rejects(
    domain.listNetworkEvents(sandboxId, 10, "garbage!"),
    (e: PlatformError) => e.code === Code.InvalidArgument,
  );
  await domain.destroySandbox(sandboxId);
  await assert.rejects(
    domain.updateNetworkPolicy(sandboxId, { allowAll: true }),
    (e: PlatformError) => e.code === Code.FailedPrecondition,
  );
});
