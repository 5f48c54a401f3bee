import assert from "node:assert/strict";
import { describe, mock, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { MemoryOrchestrator } from "../orchestrator/memory/memory-orchestrator.ts";
import type { DeploymentSpec, Orchestrator } from "../orchestrator/orchestrator.ts";
import { Controller } from "./controller.ts";
import { Annotation, Label } from "./labels.ts";
import { startSweeps } from "./sweeps.ts";

const T0 = new Date("2026-11-21T12:00:00.000Z");
const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const A = "ABCD1234-0000-4000-8000-00000000000a"; // upper case on purpose
const B = "abcd1234-1111-4000-8000-00000000000b"; // same short id as A
const C = "abcd1234-2222-4000-8000-00000000000c";
const ORG = "0f0f0f0f-0000-4000-8000-000000000001";

/** The orchestrator with some operations replaced. */
function wrap(inner: Orchestrator, overrides: Partial<Orchestrator>): Orchestrator {
  return {
    getDeployment: (n) => inner.getDeployment(n),
    createDeployment: (s) => inner.createDeployment(s),
    scaleDeployment: (n, r) => inner.scaleDeployment(n, r),
    patchAnnotations: (n, p) => inner.patchAnnotations(n, p),
    listDeployments: (s) => inner.listDeployments(s),
    deleteDeployment: (n) => inner.deleteDeployment(n),
    endpoint: (n) => inner.endpoint(n),
    ...overrides,
  };
}

function setup<O extends Orchestrator = MemoryOrchestrator>(
  orchestrator: O = new MemoryOrchestrator() as unknown as O,
) {
  let now = T0.getTime();
  const sleeps: number[] = [];
  const controller = new Controller({
    orchestrator,
    now: () => new Date(now),
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  return {
    orch: orchestrator,
    controller,
    sleeps,
    advance(ms: number) {
      now += ms;
    },
    at: () => new Date(now),
  };
}

async function rejectsWith(p: Promise<unknown>, code: Code): Promise<void> {
  await assert.rejects(p, (err) => err instanceof PlatformError && err.code === code);
}

describe("EnsureReady", () => {
  test("creates runtime-t-{first 8 hex} with every label and annotation of the spec", async () => {
    const { orch, controller } = setup();
    const r = await controller.ensureReady(A, ORG);
    assert.deepEqual(r, { deployName: "runtime-t-abcd1234", scaleState: "created" });
    const d = await orch.getDeployment("runtime-t-abcd1234");
    assert.equal(d?.replicas, 1);
    assert.deepEqual(d?.labels, { [Label.tenant]: "true", [Label.managedBy]: "runtime-controller" });
    assert.deepEqual(d?.annotations, {
      [Annotation.tenantShort]: "abcd1234",
      [Annotation.tenantId]: A.toLowerCase(),
      [Annotation.orgId]: ORG,
      [Annotation.lastSeenAt]: T0.toISOString(),
    });
    const spec = orch.specOf("runtime-t-abcd1234");
    assert.deepEqual(spec?.serviceAnnotations, { [Annotation.tenantId]: A.toLowerCase() });
    assert.deepEqual(spec?.env, { TENANT_ID: A.toLowerCase(), ORG_ID: ORG });
  });

  test("is idempotent: a running deployment answers running without writes", async () => {
    const { orch, controller } = setup();
    await controller.ensureReady(A, ORG);
    orch.calls.length = 0;
    assert.deepEqual(await controller.ensureReady(A, ORG), { deployName: "runtime-t-abcd1234", scaleState: "running" });
    assert.deepEqual(await controller.ensureReady(A, ORG), { deployName: "runtime-t-abcd1234", scaleState: "running" });
    assert.deepEqual(
      orch.calls.filter((c) => !c.startsWith("get")),
      [],
    );
  });

  test("at zero replicas it scales up, refreshes last-seen-at and clears scaled-down-at", async () => {
    const { orch, controller, advance, at } = setup();
    await controller.ensureReady(A, ORG);
    await orch.scaleDeployment("runtime-t-abcd1234", 0);
    await orch.patchAnnotations("runtime-t-abcd1234", { [Annotation.scaledDownAt]: at().toISOString() });
    advance(90 * MIN);
    assert.deepEqual(await controller.ensureReady(A, ORG), {
      deployName: "runtime-t-abcd1234",
      scaleState: "scaled-up",
    });
    const d = await orch.getDeployment("runtime-t-abcd1234");
    assert.equal(d?.replicas, 1);
    assert.equal(d?.annotations[Annotation.lastSeenAt], at().toISOString());
    assert.equal(d?.annotations[Annotation.scaledDownAt], undefined);
  });

  test("concurrent calls create once; the others answer running", async () => {
    const { orch, controller } = setup();
    const other = new Controller({ orchestrator: orch });
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => (i % 2 ? controller : other).ensureReady(A, ORG)));
    assert.equal(results.filter((r) => r.scaleState === "created").length, 1);
    assert.equal(results.filter((r) => r.scaleState === "running").length, 5);
    assert.equal(orch.calls.filter((c) => c.startsWith("createDeployment")).length >= 1, true);
    assert.equal((await orch.listDeployments({})).length, 1);
  });

  test("an already-exists conflict with the same tenant yields running", async () => {
    const inner = new MemoryOrchestrator();
    // Another router's create lands between our lookup and our create.
    const racing = wrap(inner, {
      createDeployment: async (spec: DeploymentSpec) => {
        await inner.createDeployment(spec);
        return inner.createDeployment(spec);
      },
    });
    const { controller } = setup(racing);
    assert.deepEqual(await controller.ensureReady(A, ORG), { deployName: "runtime-t-abcd1234", scaleState: "running" });
  });

  test("transient errors are retried after 100, 200, 400 ms and then succeed", async () => {
    const { orch, controller, sleeps } = setup();
    orch.failNext("getDeployment", 3);
    assert.equal((await controller.ensureReady(A, ORG)).scaleState, "created");
    assert.deepEqual(sleeps, [100, 200, 400]);
  });

  test("after five failed retries (100..1600 ms) it is DEADLINE_EXCEEDED", async () => {
    const { orch, controller, sleeps } = setup();
    orch.failNext("createDeployment", 6);
    await rejectsWith(controller.ensureReady(A, ORG), Code.DeadlineExceeded);
    assert.deepEqual(sleeps, [100, 200, 400, 800, 1600]);
    assert.equal(orch.calls.filter((c) => c.startsWith("createDeployment")).length, 6);
    assert.equal(await orch.getDeployment("runtime-t-abcd1234"), undefined);
  });

  test("non-transient orchestrator errors are not retried", async () => {
    const { orch, controller, sleeps } = setup();
    orch.failNext("getDeployment", 1, new Error("boom"));
    await rejectsWith(controller.ensureReady(A, ORG), Code.Internal);
    assert.deepEqual(sleeps, []);
  });

  test("a tenant id that is not a UUID is invalid_argument", async () => {
    const { controller } = setup();
    await rejectsWith(controller.ensureReady("not-a-uuid", ORG), Code.InvalidArgument);
  });
});

describe("tenant naming", () => {
  test("collisions between tenants take -2, -3; the resolved short id is stored and read back", async () => {
    const { orch, controller } = setup();
    assert.equal((await controller.ensureReady(A, ORG)).deployName, "runtime-t-abcd1234");
    assert.equal((await controller.ensureReady(B, ORG)).deployName, "runtime-t-abcd1234-2");
    assert.equal((await controller.ensureReady(C, ORG)).deployName, "runtime-t-abcd1234-3");
    assert.equal((await orch.getDeployment("runtime-t-abcd1234-2"))?.annotations[Annotation.tenantShort], "abcd1234-2");
    // A fresh controller (a restarted router) finds each tenant again.
    const fresh = new Controller({ orchestrator: orch });
    assert.deepEqual(await fresh.ensureReady(C, ORG), { deployName: "runtime-t-abcd1234-3", scaleState: "running" });
    assert.deepEqual(await fresh.ensureReady(B, ORG), { deployName: "runtime-t-abcd1234-2", scaleState: "running" });
  });

  test("a tenant past a freed slot is found, not created twice", async () => {
    const { orch, controller } = setup();
    await controller.ensureReady(A, ORG);
    await controller.ensureReady(B, ORG);
    await controller.suspend(A);
    const fresh = new Controller({ orchestrator: orch });
    assert.deepEqual(await fresh.ensureReady(B, ORG), { deployName: "runtime-t-abcd1234-2", scaleState: "running" });
    assert.equal((await orch.listDeployments({})).length, 1);
  });

  test("a concurrent create by a different tenant pushes this one to the next suffix", async () => {
    const inner = new MemoryOrchestrator();
    let raced = false;
    const racing = wrap(inner, {
      createDeployment: async (spec: DeploymentSpec) => {
        if (!raced) {
          raced = true;
          await new Controller({ orchestrator: inner }).ensureReady(A, ORG);
        }
        return inner.createDeployment(spec);
      },
    });
    const { controller } = setup(racing);
    assert.deepEqual(await controller.ensureReady(B, ORG), {
      deployName: "runtime-t-abcd1234-2",
      scaleState: "created",
    });
    assert.equal((await inner.getDeployment("runtime-t-abcd1234"))?.annotations[Annotation.tenantId], A.toLowerCase());
  });
});

describe("IdleSweep", () => {
  test("scales to zero only deployments whose last-seen-at is older than 60 minutes", async () => {
    const { orch, controller, advance, at } = setup();
    await controller.ensureReady(A, ORG);
    advance(2 * MIN);
    await controller.ensureReady(B, ORG);
    advance(59 * MIN); // A seen 61 min ago, B 59 min ago
    const r = await controller.idleSweep();
    assert.deepEqual(r.acted, ["runtime-t-abcd1234"]);
    assert.equal((await orch.getDeployment("runtime-t-abcd1234"))?.replicas, 0);
    assert.equal(
      (await orch.getDeployment("runtime-t-abcd1234"))?.annotations[Annotation.scaledDownAt],
      at().toISOString(),
    );
    assert.equal((await orch.getDeployment("runtime-t-abcd1234-2"))?.replicas, 1);
  });

  test("exactly 60 minutes is not yet idle; UpdateLastSeen resets the clock", async () => {
    const { orch, controller, advance } = setup();
    const { deployName } = await controller.ensureReady(A, ORG);
    advance(60 * MIN);
    assert.deepEqual((await controller.idleSweep()).acted, []);
    await controller.updateLastSeen(deployName);
    advance(30 * MIN);
    assert.deepEqual((await controller.idleSweep()).acted, []);
    advance(31 * MIN);
    assert.deepEqual((await controller.idleSweep()).acted, [deployName]);
    assert.equal((await orch.getDeployment(deployName))?.replicas, 0);
  });

  test("ignores deployments without the tenant label and keeps going past a failure", async () => {
    const { orch, controller, advance } = setup();
    await orch.createDeployment({
      name: "other",
      replicas: 1,
      labels: {},
      annotations: { [Annotation.lastSeenAt]: T0.toISOString() },
      serviceAnnotations: {},
      env: {},
    });
    await controller.ensureReady(A, ORG);
    await controller.ensureReady(B, ORG);
    advance(61 * MIN);
    orch.failNext("scaleDeployment", 1);
    const r = await controller.idleSweep();
    assert.equal(r.failed.length, 1);
    assert.equal(r.acted.length, 1);
    assert.equal((await orch.getDeployment("other"))?.replicas, 1);
  });
});

describe("WeeklySweep", () => {
  test("deletes deployments at zero replicas for 7 days or more, keeps younger and running ones", async () => {
    const { orch, controller, advance } = setup();
    await controller.ensureReady(A, ORG);
    await controller.ensureReady(B, ORG);
    await controller.ensureReady(C, ORG);
    advance(61 * MIN);
    await controller.updateLastSeen("runtime-t-abcd1234-3"); // C stays running
    await controller.idleSweep(); // A (and B) to zero now
    advance(1 * DAY);
    await controller.ensureReady(B, ORG);
    advance(61 * MIN);
    await controller.updateLastSeen("runtime-t-abcd1234-3");
    await controller.idleSweep(); // B to zero one day and an hour later than A
    advance(6 * DAY - 61 * MIN); // A: exactly 7 days at zero; B: 6 days
    assert.deepEqual((await controller.weeklySweep()).acted, ["runtime-t-abcd1234"]);
    assert.equal(await orch.getDeployment("runtime-t-abcd1234"), undefined);
    assert.equal((await orch.getDeployment("runtime-t-abcd1234-2"))?.replicas, 0);
    assert.equal((await orch.getDeployment("runtime-t-abcd1234-3"))?.replicas, 1);
    // The next request re-creates the deleted tenant.
    assert.equal((await controller.ensureReady(A, ORG)).scaleState, "created");
  });

  test("without scaled-down-at it measures from last-seen-at", async () => {
    const { orch, controller, advance } = setup();
    await controller.ensureReady(A, ORG);
    await orch.scaleDeployment("runtime-t-abcd1234", 0);
    advance(7 * DAY - 1);
    assert.deepEqual((await controller.weeklySweep()).acted, []);
    advance(1);
    assert.deepEqual((await controller.weeklySweep()).acted, ["runtime-t-abcd1234"]);
  });
});

describe("Suspend and UpdateLastSeen", () => {
  test("Suspend hard-deletes; the next EnsureReady re-creates; suspending an absent tenant is fine", async () => {
    const { orch, controller } = setup();
    await controller.ensureReady(A, ORG);
    await controller.suspend(A);
    assert.equal(await orch.getDeployment("runtime-t-abcd1234"), undefined);
    assert.ok(orch.calls.includes("deleteDeployment:runtime-t-abcd1234"));
    await controller.suspend(A);
    assert.deepEqual(await controller.ensureReady(A, ORG), { deployName: "runtime-t-abcd1234", scaleState: "created" });
  });

  test("UpdateLastSeen merge-patches only last-seen-at, RFC 3339", async () => {
    const { orch, controller, advance, at } = setup();
    const { deployName } = await controller.ensureReady(A, ORG);
    advance(5 * MIN + 123);
    await controller.updateLastSeen(deployName);
    const d = await orch.getDeployment(deployName);
    assert.equal(d?.annotations[Annotation.lastSeenAt], at().toISOString());
    assert.match(d?.annotations[Annotation.lastSeenAt] ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(d?.annotations[Annotation.tenantShort], "abcd1234");
    await rejectsWith(controller.updateLastSeen("runtime-t-absent00"), Code.NotFound);
  });
});

describe("sweep schedule", () => {
  test("IdleSweep runs every 5 minutes and WeeklySweep daily", async () => {
    mock.timers.enable({ apis: ["setInterval"] });
    try {
      let idle = 0;
      let weekly = 0;
      const fake = {
        idleSweep: async () => {
          idle++;
          return { acted: [], failed: [] };
        },
        weeklySweep: async () => {
          weekly++;
          return { acted: [], failed: [] };
        },
      } as unknown as Controller;
      const s = startSweeps(fake);
      const settle = () => new Promise((resolve) => setImmediate(resolve));
      mock.timers.tick(5 * MIN - 1);
      assert.equal(idle, 0);
      mock.timers.tick(1);
      assert.equal(idle, 1);
      await settle();
      for (let i = 1; i < 288; i++) {
        mock.timers.tick(5 * MIN);
        await settle();
      }
      assert.equal(idle, 288);
      assert.equal(weekly, 1);
      s.stop();
      const before = idle;
      mock.timers.tick(DAY);
      assert.equal(idle, before);
    } finally {
      mock.timers.reset();
    }
  });
});
