// test-timeout: 300000
// The image RPCs of ComputeService (issue 22) on a real compute (mutual TLS,
// the local driver, PostgreSQL and PGlite): who may call them, their
// validation, and CreateSandbox on an imported image; an unknown image is
// refused before any record is made.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { Code, InternalReason } from "@platform/errors";
import { ComputeService, SandboxStatus } from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, fromConnectError, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
import { testComputeConfig } from "./testing/config.ts";
import { stageRootfs, tarLayer } from "./testing/image-fixtures.ts";
import { createComputeTestDatabase } from "./testing/database.ts";

const logger = pino({ level: "silent" });
let database: Database<unknown>;
let dataDir: string;
let app: ComputeApp;
let pki: TestPki;
let url: string;

const clientAs = (caller: string) =>
  createClient(
    ComputeService,
    createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env(caller)), expectServer: "compute" }),
  );

async function expectCode(p: Promise<unknown>, code: Code, reason?: string): Promise<string> {
  let message = "";
  await assert.rejects(p, (err: unknown) => {
    const pe = fromConnectError(err);
    assert.equal(pe.code, code, `got ${Code[pe.code]} (${pe.reason}): ${pe.message}`);
    if (reason) assert.equal(pe.reason, reason);
    message = pe.message;
    return true;
  });
  return message;
}

before(async () => {
  database = await createComputeTestDatabase();
  pki = await makeTestPki(["compute", "agents", "operator", "e2b"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-images-svc-"));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    cgroupPrefix: `platform-compute-images-${process.pid}`,
    logger,
    dieWithService: true,
    defaultImage: "registry.test/sandbox:v1",
    refuseUnknownImages: true,
    warmSandboxes: 1,
  });
  app = await createComputeApp(testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  ({ url } = await app.server.listen());
  const stage = join(dataDir, "stage");
  stageRootfs(stage, { "etc/os-release": "ID=svc\n" }, ["sh", "cat", "sleep"]);
  await tarLayer(stage, join(dataDir, "rootfs.tar"));
});
after(async () => {
  await app?.close();
  await database?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  pki.remove();
});

test("import, build and delete answer only the operator; list also agents and e2b; exec stays the agents'", async () => {
  const path = join(dataDir, "rootfs.tar");
  for (const caller of ["agents", "e2b"]) {
    await expectCode(
      clientAs(caller).importImage({ name: "x:1", path }),
      Code.PermissionDenied,
      InternalReason.callerNotAllowed,
    );
    await expectCode(
      clientAs(caller).deleteImage({ name: "x:1" }),
      Code.PermissionDenied,
      InternalReason.callerNotAllowed,
    );
    await expectCode(
      clientAs(caller).buildImage({ name: "x:1" }),
      Code.PermissionDenied,
      InternalReason.callerNotAllowed,
    );
    assert.deepEqual((await clientAs(caller).listImages({})).images, []);
  }
  await expectCode(
    clientAs("operator").createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() }),
    Code.PermissionDenied,
    InternalReason.callerNotAllowed,
  );
  const listed = await clientAs("operator").listImages({});
  assert.equal(listed.defaultImage, "registry.test/sandbox:v1");
  assert.equal(listed.defaultIsHost, true);
  assert.equal(listed.anyImage, false);
});

test("validation: every bad input is INVALID_ARGUMENT (or NOT_FOUND / FAILED_PRECONDITION), nothing stored", async () => {
  const op = clientAs("operator");
  const path = join(dataDir, "rootfs.tar");
  await expectCode(op.importImage({ name: "x:1", path: "rootfs.tar" }), Code.InvalidArgument);
  await expectCode(op.importImage({ name: "x:1", path: `/${"a".repeat(5000)}` }), Code.InvalidArgument);
  await expectCode(op.importImage({ name: "", path }), Code.InvalidArgument);
  await expectCode(op.importImage({ name: "Bad Name", path }), Code.InvalidArgument);
  await expectCode(op.importImage({ name: "host", path }), Code.InvalidArgument);
  await expectCode(
    op.importImage({ name: "x:1", path: "/nonexistent/a.tar" }),
    Code.InvalidArgument,
    "image_source_invalid",
  );
  await expectCode(op.importImage({ name: "x:1", path: "/etc/hostname" }), Code.InvalidArgument);
  await expectCode(op.buildImage({ name: "x:1", packages: ["ok", "not a package"] }), Code.InvalidArgument);
  await expectCode(op.buildImage({ name: "x:1", packages: ["git"], suite: "Bad!" }), Code.InvalidArgument);
  await expectCode(op.deleteImage({ name: "" }), Code.InvalidArgument);
  await expectCode(op.deleteImage({ name: "x\u0001" }), Code.InvalidArgument);
  await expectCode(op.deleteImage({ name: "nope:1" }), Code.NotFound, "image_not_found");
  assert.deepEqual((await op.listImages({})).images, []);
});

test("a sandbox on an imported image; an unknown image refused before a record; in use, not deleted", async () => {
  const op = clientAs("operator");
  const agents = clientAs("agents");
  const { image } = await op.importImage({ name: "svc:1", path: join(dataDir, "rootfs.tar") });
  assert.equal(image?.name, "svc:1");
  assert.match(image?.digest ?? "", /^sha256:[0-9a-f]{64}$/);
  assert.ok((image?.sizeBytes ?? 0n) > 0n);

  const tenantId = randomUUID();
  const message = await expectCode(
    agents.createSandbox({ tenantId, sessionId: randomUUID(), image: "nope:2" }),
    Code.InvalidArgument,
    "image_not_found",
  );
  assert.match(message, /available: svc:1, host/);
  assert.equal((await new KyselySandboxStore(database).listLive()).filter((r) => r.tenantId === tenantId).length, 0);

  const { sandboxId } = await agents.createSandbox({ tenantId, sessionId: randomUUID(), image: "svc:1" });
  for (let i = 0; ; i++) {
    const { status } = await agents.describeSandbox({ sandboxId });
    if (status === SandboxStatus.READY) break;
    assert.equal(status, SandboxStatus.STARTING, SandboxStatus[status]);
    assert.ok(i < 600, "READY in time");
    await new Promise((r) => setTimeout(r, 100));
  }
  let out = "";
  for await (const ev of agents.execCommand({ sandboxId, command: "/bin/cat", args: ["/etc/os-release"] }))
    if (ev.event.case === "stdout") out += new TextDecoder().decode(ev.event.value.data);
  assert.equal(out, "ID=svc\n");
  await expectCode(op.deleteImage({ name: "svc:1" }), Code.FailedPrecondition, "image_in_use");
  await agents.destroySandbox({ sandboxId });
  assert.equal((await op.deleteImage({ name: "svc:1" })).image?.name, "svc:1");
});
