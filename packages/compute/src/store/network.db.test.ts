// The network policy and events persist (migration 0003) on PostgreSQL and PGlite.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import type { Database } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { validateNetworkPolicy } from "@platform/network-policy";
import { runMigrations } from "../app.ts";
import { KyselyNetworkEventStore } from "./kysely-network-event-store.ts";
import { KyselySandboxStore } from "./kysely-sandbox-store.ts";

let database: Database<unknown>;
before(async () => {
  database = await createTestDatabase<unknown>();
  await runMigrations(database);
});
after(() => database.close());

test("a sandbox's network policy is stored, replaced and cleared", async () => {
  const store = new KyselySandboxStore(database);
  const policy = validateNetworkPolicy({
    allowedDomains: ["*.example.com"],
    allowedCidrs: [{ cidr: "203.0.113.0/24", ports: [443] }],
  });
  const now = new Date();
  const id = randomUUID();
  await store.insert({
    id,
    tenantId: randomUUID(),
    sessionId: randomUUID(),
    image: "i",
    storageClass: "",
    workspaceSize: "5Gi",
    mountPath: "/workspace",
    cpuMillis: 1000,
    memoryBytes: 1 << 30,
    maxRuntimeMs: 60_000,
    idleTimeoutMs: 0,
    pausedMs: 0,
    pausedAt: null,
    status: "STARTING",
    failureReason: null,
    driver: "local",
    createdAt: now,
    updatedAt: now,
    destroyedAt: null,
    totalUsage: null,
    networkPolicy: policy,
  });
  assert.deepEqual((await store.get(id))?.networkPolicy, policy);
  assert.deepEqual((await store.listLive()).find((r) => r.id === id)?.networkPolicy, policy);
  const allowAll = validateNetworkPolicy({ allowAll: true });
  assert.deepEqual((await store.setNetworkPolicy(id, allowAll))?.networkPolicy, allowAll);
  assert.equal((await store.setNetworkPolicy(id, null))?.networkPolicy, null);
  assert.equal(await store.setNetworkPolicy(randomUUID(), null), undefined);
});

test("network events are appended, listed after a position and totalled", async () => {
  const events = new KyselyNetworkEventStore(database);
  const sandboxId = randomUUID();
  assert.deepEqual(await events.totals(sandboxId), { lastSeq: 0, egressBytes: 0, ingressBytes: 0 });
  for (let seq = 1; seq <= 3; seq++) {
    await events.append({
      sandboxId,
      seq,
      at: new Date(),
      host: "example.com",
      port: 443,
      address: "203.0.113.5",
      allowed: seq !== 2,
      reason: seq === 2 ? "not_allowed" : "",
      protocol: "connect",
      egressBytes: 100 * seq,
      ingressBytes: 5_000_000_000 * seq,
      durationMs: 12.6,
    });
  }
  const listed = await events.list(sandboxId, 1, 10);
  assert.deepEqual(
    listed.map((e) => e.seq),
    [2, 3],
  );
  assert.equal(listed[0]?.reason, "not_allowed");
  assert.equal(listed[1]?.ingressBytes, 15_000_000_000);
  assert.equal(listed[1]?.durationMs, 13);
  assert.deepEqual(await events.totals(sandboxId), { lastSeq: 3, egressBytes: 600, ingressBytes: 30_000_000_000 });
});
