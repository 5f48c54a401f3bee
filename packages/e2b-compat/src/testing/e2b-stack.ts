import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ComputeDomain, LocalDriver, MemorySandboxStore } from "@platform/compute";
import { IdentityClient } from "@platform/identity-client";
import { IdentityDouble } from "@platform/identity-client/testing";
import { pino } from "pino";
import { type E2bCompat, startE2bCompat } from "../server.ts";

/** The real compute domain (local driver), identity's double and the E2B listener on 127.0.0.1, for the SDK tests. */
export interface E2bStack {
  compat: E2bCompat;
  domain: ComputeDomain;
  store: MemorySandboxStore;
  identity: IdentityDouble;
  close(): Promise<void>;
}

export async function startE2bStack(name: string): Promise<E2bStack> {
  const logger = pino({ level: process.env.LOG_LEVEL ?? "silent" });
  const dataDir = fs.mkdtempSync(join(tmpdir(), `e2b-${name}-`));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 300,
    pidsMax: 128,
    cgroupPrefix: `platform-e2b-${name}-${process.pid}`,
    logger,
    dieWithService: true,
    warmSandboxes: 1,
  });
  const store = new MemorySandboxStore();
  const domain = new ComputeDomain({
    driver,
    store,
    defaults: { image: "debian:bookworm-slim", storageClass: "", workspaceSize: "256Mi" },
    idlePauseMs: 0,
    logger,
  });
  await domain.start();
  const identity = new IdentityDouble();
  const identityUrl = await identity.start();
  const auth = new IdentityClient(createGrpcTransport({ baseUrl: identityUrl }));
  const compat = await startE2bCompat({ domain, logger, port: 0, verify: (key) => auth.verifyToken(key) });
  return {
    compat,
    domain,
    store,
    identity,
    async close() {
      await compat.close();
      for (const r of await store.listLive()) await domain.destroySandbox(r.id).catch(() => {});
      await domain.stop();
      await driver.close();
      await identity.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
