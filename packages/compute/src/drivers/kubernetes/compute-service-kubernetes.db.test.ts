// ComputeService over gRPC with the Kubernetes driver against the API-server
// double: the domain (defaults, state table, exec wait, path rules) and the
// driver together, as the cluster shape runs them.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { Code } from "@platform/errors";
import { ComputeService, SandboxStatus } from "@platform/gen/compute/v1/compute_pb";
import { KubeDouble } from "@platform/kube-testing";
import { fromConnectError } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "../../app.ts";
import type { ComputeConfig } from "../../config.ts";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { testComputeConfig } from "../../testing/config.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";
import { claimName, podName } from "./objects.ts";
import { createComputeTestDatabase } from "../../testing/database.ts";

const NS = "sandboxes";
const logger = pino({ level: "silent" });
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

let double: KubeDouble;
let database: Database<unknown>;
let app: ComputeApp;
let client: Client<typeof ComputeService>;

const config: ComputeConfig = testComputeConfig({
  COMPUTE_DATA_DIR: "/tmp/unused-by-the-kubernetes-driver",
  COMPUTE_DRIVER: "kubernetes",
});

before(async () => {
  double = await KubeDouble.start({ namespaces: [NS] });
  database = await createComputeTestDatabase();
  const driver = new KubernetesDriver({
    kubeConfig: double.kubeConfig(NS),
    namespace: NS,
    killGraceMs: 300,
    pollIntervalMs: 50,
    defaultStorageClass: config.pvcStorageClass,
    defaultSize: config.pvcWorkspaceSize,
  });
  // Plaintext: this suite is about the Kubernetes driver behind the API; mTLS is tested in compute-service.db.test.ts.
  app = await createComputeApp(config, logger, { driver, database, internalTls: undefined });
  const { url } = await app.server.listen();
  client = createClient(ComputeService, createGrpcTransport({ baseUrl: url }));
});

after(async () => {
  await app?.close();
  await database?.close();
  await double?.close();
});

async function expectCode(p: Promise<unknown>, code: Code): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    const pe = fromConnectError(err);
    assert.equal(pe.code, code, `got ${Code[pe.code]}: ${pe.message}`);
    return true;
  });
}

async function run(id: string, command: string, args: string[] = []) {
  let stdout = "";
  let exitCode: number | undefined;
  for await (const e of client.execCommand({ sandboxId: id, command, args })) {
    if (e.event.case === "stdout") stdout += dec(e.event.value.data);
    if (e.event.case === "completed") exitCode = e.event.value.exitCode;
  }
  return { stdout, exitCode };
}

describe("compute service on the Kubernetes driver", () => {
  test("CreateSandbox answers STARTING; the pod and PVC carry the tenant, the image and PVC_* defaults; exec waits for running", async () => {
    const tenantId = randomUUID();
    const sessionId = randomUUID();
    const res = await client.createSandbox({ tenantId, sessionId });
    assert.equal(res.status, SandboxStatus.STARTING);
    const pod = double.get("pods", NS, podName(res.sandboxId));
    const pvc = double.get("persistentvolumeclaims", NS, claimName(tenantId, sessionId));
    assert.equal(pod?.metadata.annotations.tenant_id, tenantId);
    assert.equal(pod?.spec.containers[0].image, "registry.test/sandbox:v1");
    assert.equal(pvc?.spec.storageClassName, "fast-ssd");
    assert.equal(pvc?.spec.resources.requests.storage, "7Gi");
    // Spec defaults: 1000 millicores, 1 GiB, 15 minutes.
    assert.deepEqual(pod?.spec.containers[0].resources.limits, { cpu: "1000m", memory: String(1024 ** 3) });
    assert.ok(pod?.spec.activeDeadlineSeconds > 890 && pod?.spec.activeDeadlineSeconds <= 900);
    const r = await run(res.sandboxId, "/bin/sh", ["-c", "echo hello; exit 5"]);
    assert.equal(r.stdout, "hello\n");
    assert.equal(r.exitCode, 5);
    assert.equal((await client.describeSandbox({ sandboxId: res.sandboxId })).status, SandboxStatus.READY);
  });

  test("files: write, read, list; `..` is INVALID_ARGUMENT, a symlink out of the mount PERMISSION_DENIED", async () => {
    const { sandboxId } = await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() });
    await run(sandboxId, "/bin/true");
    const w = await client.writeFile({ sandboxId, path: "notes/a.txt", data: enc("abc") });
    assert.equal(w.bytesWritten, 3n);
    const r = await client.readFile({ sandboxId, path: "/workspace/notes/a.txt" });
    assert.equal(dec(r.data), "abc");
    assert.equal(r.eof, true);
    const l = await client.listFiles({ sandboxId, path: "notes" });
    assert.deepEqual(
      l.entries.map((e) => e.path),
      ["a.txt"],
    );
    await expectCode(client.readFile({ sandboxId, path: "../etc/passwd" }), Code.InvalidArgument);
    await run(sandboxId, "/bin/ln", ["-s", "/etc", "out"]);
    await expectCode(client.readFile({ sandboxId, path: "out/hostname" }), Code.PermissionDenied);
  });

  test("DestroySandbox: DESTROYED, pod gone, PVC marked delete-after; exec is FAILED_PRECONDITION", async () => {
    const tenantId = randomUUID();
    const sessionId = randomUUID();
    const { sandboxId } = await client.createSandbox({ tenantId, sessionId });
    await run(sandboxId, "/bin/true");
    await client.destroySandbox({ sandboxId });
    assert.equal((await client.describeSandbox({ sandboxId })).status, SandboxStatus.DESTROYED);
    assert.ok(
      double.get("pods", NS, podName(sandboxId))?.metadata.deletionTimestamp ?? true,
      "pod deleted or terminating",
    );
    assert.ok(
      double.get("persistentvolumeclaims", NS, claimName(tenantId, sessionId))?.metadata.annotations[DELETE_AFTER_KEY],
    );
    await expectCode(run(sandboxId, "/bin/true"), Code.FailedPrecondition);
  });

  test("a sandbox past max_runtime becomes FAILED through the pod's activeDeadlineSeconds", async () => {
    const { sandboxId } = await client.createSandbox({
      tenantId: randomUUID(),
      sessionId: randomUUID(),
      limits: { maxRuntime: durationFromMs(1000) },
    });
    assert.equal(double.get("pods", NS, podName(sandboxId))?.spec.activeDeadlineSeconds, 1);
    const until = Date.now() + 15_000;
    let status = SandboxStatus.STARTING;
    while (status !== SandboxStatus.FAILED && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await client.describeSandbox({ sandboxId })).status;
    }
    assert.equal(status, SandboxStatus.FAILED);
    await expectCode(run(sandboxId, "/bin/true"), Code.FailedPrecondition);
  });
});
