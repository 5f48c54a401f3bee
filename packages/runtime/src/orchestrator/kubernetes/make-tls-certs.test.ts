// k8s/make-tls-certs.sh (the openssl way to the Secrets, for clusters without
// cert-manager) makes certificates the services accept: each names its
// service, comes from one CA, matches its key, and covers the names callers
// dial; a tenant worker serving with them admits the router and no one else.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkServerIdentity } from "node:tls";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { createServiceTransport, loadServiceTls } from "@platform/rpc";
import { isServing } from "../../health/grpc-health.ts";
import { startWorker } from "../../worker/worker.ts";

const script = fileURLToPath(new URL("../../../../../k8s/make-tls-certs.sh", import.meta.url));
const hasOpenssl = spawnSync("openssl", ["version"], { stdio: "ignore" }).status === 0;
const NAMES = ["identity", "compute", "agents", "runtime-router", "runtime-worker", "operator"];
const TENANT = "7e57a000-0000-4000-8000-000000000001";

describe("k8s/make-tls-certs.sh", { skip: !hasOpenssl && "openssl is not installed" }, () => {
  let dir: string;
  const env = (name: string) => ({
    TLS_CA_FILE: join(dir, "ca.crt"),
    TLS_CERT_FILE: join(dir, `${name}.crt`),
    TLS_KEY_FILE: join(dir, `${name}.key`),
  });
  const cert = async (name: string) => new X509Certificate(await readFile(join(dir, `${name}.crt`)));
  // What checkServerIdentity needs of a peer certificate, from an X509Certificate.
  const peer = (c: X509Certificate) =>
    ({ subject: { CN: /CN=(.*)/.exec(c.subject)?.[1] }, subjectaltname: c.subjectAltName }) as never;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "make-tls-certs-"));
    await promisify(execFile)("sh", [script, dir, "agent-platform"]);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("every certificate comes from the one CA, matches its key and names its service (CN and spiffe URI)", async () => {
    for (const name of NAMES) assert.equal(loadServiceTls(env(name), name).name, name);
    assert.match((await cert("runtime-router")).subjectAltName ?? "", /URI:spiffe:\/\/platform\/runtime-router/);
  });

  test("server certificates cover the names callers dial, the workers' every tenant Service; operator is a client only", async () => {
    for (const name of ["identity", "compute", "agents"]) {
      const c = peer(await cert(name));
      for (const host of [name, `${name}.agent-platform.svc.cluster.local`, "localhost"]) {
        assert.equal(checkServerIdentity(host, c), undefined, `${name} as ${host}`);
      }
      assert.ok(checkServerIdentity("evil.example", c), "and not anything else");
    }
    // The endpoint the Kubernetes orchestrator gives the router.
    const worker = peer(await cert("runtime-worker"));
    assert.equal(checkServerIdentity("runtime-t-0b7c3f9e.agent-platform.svc.cluster.local", worker), undefined);
    assert.ok(checkServerIdentity("runtime-t-0b7c3f9e.other-namespace.svc.cluster.local", worker));
    assert.doesNotMatch((await cert("operator")).toString(), /TLS Web Server Authentication/);
  });

  test("a worker serving with them admits the router's certificate only", async () => {
    const worker = await startWorker({
      tenantId: TENANT,
      orgId: TENANT,
      agentsUrl: "https://127.0.0.1:9",
      port: 0,
      host: "127.0.0.1",
      tls: loadServiceTls(env("runtime-worker")),
    });
    try {
      assert.equal(
        await isServing(worker.url, undefined, 5000, undefined, loadServiceTls(env("runtime-router"))),
        true,
      );
      const asOperator = createClient(
        RuntimeService,
        createServiceTransport({ baseUrl: worker.url, tls: loadServiceTls(env("operator")) }),
      );
      await assert.rejects(
        (async () => {
          for await (const _ of asOperator.invoke({ sessionId: TENANT }));
        })(),
        (err: unknown) => err instanceof ConnectError && err.code === Code.PermissionDenied,
      );
    } finally {
      await worker.close();
    }
  });

  test("run again, it keeps the CA and makes new service certificates", async () => {
    const ca = await readFile(join(dir, "ca.crt"), "utf8");
    const before = (await cert("agents")).serialNumber;
    await promisify(execFile)("sh", [script, dir]);
    assert.equal(await readFile(join(dir, "ca.crt"), "utf8"), ca);
    assert.notEqual((await cert("agents")).serialNumber, before);
    assert.equal(loadServiceTls(env("agents"), "agents").name, "agents");
  });
});
