// Issue 15 item 7 on the real compute service: with its PostgreSQL down (a
// private cluster this test stops; never the shared server) a call that
// needs the database is UNAVAILABLE with a Retry-After, not INTERNAL (nor a
// wrong NOT_FOUND), and the same call is answered again once it is back.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { type Database, openDatabase } from "@platform/db";
import { type PrivateCluster, startPrivateCluster } from "@platform/db/testing-pg-cluster";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { createServiceTransport } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { testComputeConfig } from "./testing/config.ts";

const logger = pino({ level: "silent" });
let cluster: PrivateCluster;
let database: Database<unknown>;
let app: ComputeApp;
let dataDir: string;
let url: string;

before(async () => {
  cluster = await startPrivateCluster();
  database = await openDatabase<unknown>({ url: await cluster.database("compute"), minConnections: 0 });
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-dbdown-"));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix: `platform-compute-dbdown-${process.pid}`,
    logger,
    dieWithService: true,
  });
  app = await createComputeApp(testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), logger, {
    driver,
    database,
    internalTls: undefined,
  });
  ({ url } = await app.server.listen());
});
after(async () => {
  await app?.close().catch(() => {});
  await database?.close().catch(() => {});
  cluster?.destroy();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

test("the database down: DescribeSandbox is UNAVAILABLE with Retry-After, then answered again when it is back", async () => {
  const client = createClient(ComputeService, createServiceTransport({ baseUrl: url, tls: undefined }));
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => assert.fail("expected an error"),
      (err: unknown) => ConnectError.from(err),
    );
  const id = randomUUID();
  assert.equal((await codeOf(client.describeSandbox({ sandboxId: id }))).code, Code.NotFound);

  cluster.stop("immediate");
  const started = performance.now();
  const down = await codeOf(client.describeSandbox({ sandboxId: id }));
  const ms = performance.now() - started;
  assert.equal(down.code, Code.Unavailable, down.message);
  assert.equal(down.metadata.get("retry-after"), "5");
  assert.ok(ms < 5000, `answered after ${ms.toFixed(0)} ms`);

  cluster.start();
  const back = performance.now();
  for (;;) {
    const e = await codeOf(client.describeSandbox({ sandboxId: id }));
    if (e.code === Code.NotFound) break;
    assert.equal(e.code, Code.Unavailable, e.message);
    assert.ok(performance.now() - back < 20_000, "not answered 20 s after the database came back");
    await sleep(200);
  }
  console.log(
    `database down: DescribeSandbox UNAVAILABLE (retry-after ${down.metadata.get("retry-after")}) in ${ms.toFixed(0)} ms; answered again ${(performance.now() - back).toFixed(0)} ms after the start`,
  );
});
