import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { type DeploymentSpec, isAlreadyExists, isNotFound, type Orchestrator } from "../orchestrator/orchestrator.ts";

/**
 * The behaviour every Orchestrator adapter must show, as seen through the
 * port only. Run it from the adapter's test file:
 *
 *   orchestratorContract("local", async () => new LocalOrchestrator({...}));
 *
 * One orchestrator is made per suite (closed at the end); every test uses
 * fresh random names, so a backend that persists between runs is fine.
 * Deployments are created at 0 replicas, so no worker has to start.
 */
export function orchestratorContract(name: string, makeOrchestrator: () => Promise<Orchestrator> | Orchestrator): void {
  describe(`orchestrator contract: ${name}`, () => {
    let orch: Orchestrator;
    const created: string[] = [];
    // A label unique to this run, so listing ignores other runs' leftovers.
    const run = randomBytes(4).toString("hex");

    function spec(overrides: Partial<DeploymentSpec> = {}): DeploymentSpec {
      const deployName = `runtime-t-${randomBytes(4).toString("hex")}`;
      created.push(overrides.name ?? deployName);
      return {
        name: deployName,
        replicas: 0,
        labels: {
          "runtime.platform.io/tenant": "true",
          "app.kubernetes.io/managed-by": "runtime-controller",
          "contract-run": run,
        },
        annotations: {
          "runtime.platform.io/tenant-id": "00000000-0000-4000-8000-000000000001",
          "runtime.platform.io/tenant-short": "00000000",
        },
        serviceAnnotations: { "runtime.platform.io/tenant-id": "00000000-0000-4000-8000-000000000001" },
        env: { TENANT_ID: "00000000-0000-4000-8000-000000000001", ORG_ID: "00000000-0000-4000-8000-000000000001" },
        ...overrides,
      };
    }

    async function expectKind(p: Promise<unknown>, check: (e: unknown) => boolean, what: string): Promise<void> {
      await assert.rejects(p, (err) => {
        assert.ok(check(err), `expected ${what}, got ${String(err)}`);
        return true;
      });
    }

    before(async () => {
      orch = await makeOrchestrator();
    });
    after(async () => {
      for (const n of created) await orch.deleteDeployment(n).catch(() => {});
      await orch.close?.();
    });

    test("a missing deployment reads as undefined and has no endpoint", async () => {
      assert.equal(await orch.getDeployment("runtime-t-absent00"), undefined);
      assert.equal(await orch.endpoint("runtime-t-absent00"), undefined);
    });

    test("create returns and stores replicas, labels and annotations", async () => {
      const s = spec();
      const made = await orch.createDeployment(s);
      assert.equal(made.name, s.name);
      assert.equal(made.replicas, 0);
      const got = await orch.getDeployment(s.name);
      assert.ok(got);
      assert.equal(got.name, s.name);
      assert.equal(got.replicas, 0);
      assert.equal(got.readyReplicas, 0);
      for (const [k, v] of Object.entries(s.labels)) assert.equal(got.labels[k], v, `label ${k}`);
      for (const [k, v] of Object.entries(s.annotations)) assert.equal(got.annotations[k], v, `annotation ${k}`);
      const url = await orch.endpoint(s.name);
      assert.ok(url && /^https?:\/\/[^/]+:\d+$/.test(url), `endpoint ${url}`);
    });

    test("creating an existing name fails with already_exists and keeps the first", async () => {
      const s = spec();
      await orch.createDeployment(s);
      await expectKind(
        orch.createDeployment({ ...s, annotations: { ...s.annotations, "runtime.platform.io/tenant-id": "other" } }),
        isAlreadyExists,
        "already_exists",
      );
      const got = await orch.getDeployment(s.name);
      assert.equal(got?.annotations["runtime.platform.io/tenant-id"], s.annotations["runtime.platform.io/tenant-id"]);
    });

    test("concurrent creates of one name: exactly one succeeds, the rest already_exists", async () => {
      const s = spec();
      const results = await Promise.allSettled([1, 2, 3].map(() => orch.createDeployment(s)));
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
      for (const r of results) if (r.status === "rejected") assert.ok(isAlreadyExists(r.reason), String(r.reason));
    });

    test("scale sets the desired replicas; scaling an absent deployment is not_found", async () => {
      const s = spec();
      await orch.createDeployment(s);
      await orch.scaleDeployment(s.name, 0);
      assert.equal((await orch.getDeployment(s.name))?.replicas, 0);
      await expectKind(orch.scaleDeployment("runtime-t-absent01", 1), isNotFound, "not_found");
    });

    test("patchAnnotations merges: sets, overwrites, null removes, others stay", async () => {
      const s = spec({ annotations: { a: "1", b: "2", c: "3" } });
      await orch.createDeployment(s);
      await orch.patchAnnotations(s.name, { b: "20", c: null, d: "4" });
      const got = await orch.getDeployment(s.name);
      assert.equal(got?.annotations.a, "1");
      assert.equal(got?.annotations.b, "20");
      assert.equal("c" in (got?.annotations ?? {}), false);
      assert.equal(got?.annotations.d, "4");
      // Labels are untouched by an annotation patch.
      assert.equal(got?.labels["contract-run"], run);
      await expectKind(orch.patchAnnotations("runtime-t-absent02", { a: "1" }), isNotFound, "not_found");
    });

    test("listDeployments matches every pair of the selector", async () => {
      const a = spec({ labels: { "contract-run": run, kind: "x", tier: "1" } });
      const b = spec({ labels: { "contract-run": run, kind: "x", tier: "2" } });
      const c = spec({ labels: { "contract-run": run, kind: "y", tier: "1" } });
      for (const s of [a, b, c]) await orch.createDeployment(s);
      const names = async (sel: Record<string, string>) => (await orch.listDeployments(sel)).map((d) => d.name).sort();
      assert.deepEqual(await names({ "contract-run": run, kind: "x" }), [a.name, b.name].sort());
      assert.deepEqual(await names({ "contract-run": run, kind: "x", tier: "2" }), [b.name]);
      assert.deepEqual(await names({ "contract-run": run, kind: "z" }), []);
      const listed = (await orch.listDeployments({ "contract-run": run, kind: "y" }))[0];
      assert.equal(listed?.replicas, 0);
      assert.equal(listed?.labels.tier, "1");
    });

    test("delete removes the deployment; deleting again is fine; the name can be reused", async () => {
      const s = spec();
      await orch.createDeployment(s);
      await orch.deleteDeployment(s.name);
      assert.equal(await orch.getDeployment(s.name), undefined);
      assert.equal(await orch.endpoint(s.name), undefined);
      await orch.deleteDeployment(s.name);
      await orch.createDeployment(s);
      assert.ok(await orch.getDeployment(s.name));
    });
  });
}
