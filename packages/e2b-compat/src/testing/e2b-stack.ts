import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ComputeApp, createComputeApp, LocalDriver, loadConfig } from "@platform/compute";
import { createTestDatabase } from "@platform/db/testing";
import { IdentityDouble } from "@platform/identity-client/testing";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { startE2bApp } from "../app.ts";
import type { ComputePort } from "../compute-port.ts";
import { grpcCompute } from "../grpc-compute.ts";
import type { E2bCompat } from "../server.ts";

/**
 * The real thing on 127.0.0.1: compute (the local driver, its database) over
 * mutual TLS, identity's double answering only the `e2b` certificate, and the
 * e2b service as main.ts starts it.
 */
export interface E2bStack {
  compat: E2bCompat;
  compute: ComputeApp;
  /** compute's ComputeService as the e2b service reaches it. */
  computePort: ComputePort;
  identity: IdentityDouble;
  close(): Promise<void>;
}

export async function startE2bStack(name: string): Promise<E2bStack> {
  const logger = pino({ level: process.env.LOG_LEVEL ?? "silent" });
  const pki: TestPki = await makeTestPki(["compute", "identity", "e2b", "agents"]);
  const dataDir = fs.mkdtempSync(join(tmpdir(), `e2b-${name}-`));
  fs.chmodSync(dataDir, 0o711);
  const database = await createTestDatabase<unknown>();
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 300,
    pidsMax: 128,
    cgroupPrefix: `platform-e2b-${name}-${process.pid}`,
    logger,
    dieWithService: true,
    warmSandboxes: 1,
  });
  const compute = await createComputeApp(
    loadConfig({
      COMPUTE_DATA_DIR: dataDir,
      COMPUTE_PORT: "0",
      HOST: "127.0.0.1",
      COMPUTE_IDLE_PAUSE_SECONDS: "off",
      PVC_WORKSPACE_SIZE: "256Mi",
      LOG_LEVEL: "silent",
      SANDBOX_IMAGE: "host",
    }),
    logger,
    { driver, database, internalTls: loadServiceTls(pki.env("compute"), "compute") },
  );
  const { url: computeUrl } = await compute.server.listen();
  const identity = new IdentityDouble({ tls: loadServiceTls(pki.env("identity"), "identity"), callers: ["e2b"] });
  const identityUrl = await identity.start();
  const compat = await startE2bApp(
    { port: 0, host: "127.0.0.1", computeGrpcUrl: computeUrl, identityGrpcUrl: identityUrl, logLevel: "silent" },
    logger,
    loadServiceTls(pki.env("e2b"), "e2b"),
  );
  return {
    compat,
    compute,
    computePort: grpcCompute(
      createServiceTransport({
        baseUrl: computeUrl,
        tls: loadServiceTls(pki.env("e2b"), "e2b"),
        expectServer: "compute",
      }),
    ),
    identity,
    async close() {
      await compat.close();
      await compute.close();
      await identity.stop();
      await database.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
      pki.remove();
    },
  };
}
