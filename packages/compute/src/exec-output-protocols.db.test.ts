// Exec output through the real compute service in each protocol: plain gRPC
// takes @platform/rpc's direct path, whose encoder writes a stdout chunk's
// bytes as they are (spliced-encoding.ts); gRPC-Web and Connect go through
// Connect's generic encoder. All three must bring the same bytes.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { MAX_EVENT_BYTES } from "./drivers/local/output-queue.ts";
import { testComputeConfig } from "./testing/config.ts";
import { createComputeTestDatabase } from "./testing/database.ts";

const logger = pino({ level: "silent" });

let database: Database<unknown>;
let dataDir: string;
let app: ComputeApp;
let pki: TestPki;
let url: string;
let sandboxId: string;

function clientOf(protocol: "grpc" | "grpc-web" | "connect"): Client<typeof ComputeService> {
  const tls = loadServiceTls(pki.env("agents"));
  const sessionManager = new Http2SessionManager(url, undefined, { ca: tls.ca, cert: tls.cert, key: tls.key });
  const options = { baseUrl: url, httpVersion: "2" as const, sessionManager, readMaxBytes: 4 << 20 };
  const transport: Transport =
    protocol === "grpc"
      ? createGrpcTransport(options)
      : protocol === "grpc-web"
        ? createGrpcWebTransport(options)
        : createConnectTransport(options);
  return createClient(ComputeService, transport);
}

async function exec(client: Client<typeof ComputeService>, script: string) {
  const stdout: Uint8Array[] = [];
  let stderr = "";
  let exitCode: number | undefined;
  for await (const e of client.execCommand({ sandboxId, command: "/bin/sh", args: ["-c", script] })) {
    assert.ok(e.emittedAt, "every event carries emitted_at");
    if (e.event.case === "stdout") stdout.push(e.event.value.data);
    if (e.event.case === "stderr") stderr += new TextDecoder().decode(e.event.value.data);
    if (e.event.case === "completed") exitCode = e.event.value.exitCode;
  }
  return { stdout, stderr, exitCode };
}

before(async () => {
  database = await createComputeTestDatabase();
  pki = await makeTestPki(["compute", "agents"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-exec-protocols-"));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix: `platform-compute-protocols-${process.pid}`,
    logger,
    dieWithService: true,
  });
  app = await createComputeApp(testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  ({ url } = await app.server.listen());
  const res = await clientOf("grpc").createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() });
  sandboxId = res.sandboxId;
  // 3.5 MiB of random bytes: events of up to MAX_EVENT_BYTES, well past the splice threshold.
  const made = await exec(clientOf("grpc"), "head -c 3670016 /dev/urandom > out.bin");
  assert.equal(made.exitCode, 0);
});

after(async () => {
  await clientOf("grpc")
    .destroySandbox({ sandboxId })
    .catch(() => {});
  await app?.close();
  await database?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  pki?.remove();
});

describe("exec output in every protocol", () => {
  for (const protocol of ["grpc", "grpc-web", "connect"] as const) {
    test(`${protocol}: large, small and empty output arrive byte for byte`, async () => {
      const client = clientOf(protocol);
      const file = await client.readFile({ sandboxId, path: "out.bin" });
      assert.equal(file.data.length, 3670016);

      const big = await exec(client, "cat out.bin; echo done >&2");
      assert.equal(big.exitCode, 0);
      assert.equal(big.stderr, "done\n");
      assert.ok(
        big.stdout.every((c) => c.length > 0 && c.length <= MAX_EVENT_BYTES),
        "chunks are 1 B to 1 MiB",
      );
      assert.ok(Buffer.concat(big.stdout).equals(file.data), "the output is the file");

      const small = await exec(client, "printf 'a\\0b'");
      assert.ok(Buffer.concat(small.stdout).equals(Buffer.from("a\0b")));

      const none = await exec(client, "true");
      assert.equal(none.exitCode, 0);
      assert.equal(none.stdout.length, 0);
    });
  }
});
