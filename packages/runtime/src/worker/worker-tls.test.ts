// A tenant worker's gRPC port admits the router's certificate only: no
// certificate, another CA's or another service's is refused, by Node's
// client and by python3-grpcio (C core); the worker calls agents over mutual
// TLS with its own certificate.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import * as tls from "node:tls";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, fromConnectError, loadServiceTls, type ServiceTls } from "@platform/rpc";
import { Metadata } from "../metadata.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { warmUp } from "./warm-up.ts";
import { type RunningServer, startWorker } from "./worker.ts";

const TENANT = "7e57a000-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";
const headers = {
  [Metadata.authorization]: "Bearer tok.en.sig",
  [Metadata.tenantId]: TENANT,
  [Metadata.orgId]: TENANT,
  [Metadata.userId]: USER,
};
const python = "/usr/bin/python3";
const probe = fileURLToPath(new URL("./grpcio_worker_probe.py", import.meta.url));

describe("tenant worker over mutual TLS", () => {
  let pki: TestPki;
  let foreign: TestPki;
  let agents: AgentsDouble;
  let worker: RunningServer;
  const tlsOf = (name: string, from = () => pki): ServiceTls => loadServiceTls(from().env(name));

  before(async () => {
    pki = await makeTestPki(["runtime-router", "runtime-worker", "agents", "operator"]);
    foreign = await makeTestPki(["runtime-router"]);
    agents = new AgentsDouble(tlsOf("agents"));
    const agentsUrl = await agents.start();
    worker = await startWorker({
      tenantId: TENANT,
      orgId: TENANT,
      agentsUrl,
      port: 0,
      host: "127.0.0.1",
      tls: tlsOf("runtime-worker"),
    });
  });
  after(async () => {
    await worker?.close();
    await agents?.close();
    pki?.remove();
    foreign?.remove();
  });

  const invoke = async (transport: Parameters<typeof createClient>[1]) => {
    const out: string[] = [];
    const client = createClient(RuntimeService, transport);
    for await (const e of client.invoke(
      { sessionId: SESSION, messages: [{ role: "user", content: "hi" }] },
      { headers },
    )) {
      out.push(e.event.case ?? "");
    }
    return out;
  };
  /** A raw TLS connection to the worker: the error that ends it, or "open" when it stays up. */
  const handshake = (options: tls.ConnectionOptions) =>
    new Promise<string>((resolve) => {
      const { port } = new URL(worker.url);
      const socket = tls.connect({
        ...options,
        host: "127.0.0.1",
        port: Number(port),
        servername: "localhost",
        ALPNProtocols: ["h2"],
      });
      const timer = setTimeout(() => {
        socket.destroy();
        resolve("open");
      }, 500);
      socket.once("error", (err) => {
        clearTimeout(timer);
        resolve(err.message);
      });
      socket.once("close", () => {
        clearTimeout(timer);
        resolve("closed");
      });
    });
  const refused = async (p: Promise<unknown>): Promise<ConnectError> => {
    const err = await p.then(
      () => assert.fail("the call went through"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectError, String(err));
    return err;
  };

  test("the router's certificate gets through; the worker calls agents with the runtime-worker certificate", async () => {
    assert.match(worker.url, /^https:\/\//);
    agents.calls.length = 0;
    const events = await invoke(
      createServiceTransport({ baseUrl: worker.url, tls: tlsOf("runtime-router"), expectServer: "runtime-worker" }),
    );
    assert.deepEqual(events, ["textChunk", "turnDone"]);
    assert.equal(agents.calls.length, 1, "agents (mTLS, runtime-worker only) was called");
  });

  test("a caller without a certificate, or with another CA's, is refused at the handshake", async () => {
    // Trusts the worker's CA but presents nothing.
    const anonymous = createGrpcTransport({
      baseUrl: worker.url,
      sessionManager: new Http2SessionManager(worker.url, undefined, { ca: pki.pem("runtime-router").ca }),
    });
    const other = tlsOf("runtime-router", () => foreign);
    const otherCa = { ...other, ca: Buffer.from(pki.pem("runtime-router").ca) };
    for (const transport of [
      anonymous,
      // A router certificate of another CA: same name, wrong issuer.
      createServiceTransport({ baseUrl: worker.url, tls: otherCa }),
      // Plaintext to the TLS port.
      createGrpcTransport({ baseUrl: worker.url.replace("https:", "http:") }),
    ]) {
      const err = await refused(invoke(transport));
      // Not an answer of the server's (which would be PERMISSION_DENIED): the connection never got that far.
      assert.notEqual(err.code, Code.PermissionDenied, err.message);
    }
    // The reasons, as the TLS layer gives them (TLS 1.3: the server's alert
    // arrives after the client's side of the handshake).
    const ca = pki.pem("runtime-router").ca;
    assert.match(await handshake({ ca }), /certificate required/);
    // Node's server ends the connection (no alert text reaches this client).
    assert.match(await handshake({ ca, cert: otherCa.cert, key: otherCa.key }), /^closed$|unknown ca/);
    const router = tlsOf("runtime-router");
    assert.equal(await handshake({ ca, cert: router.cert, key: router.key }), "open");
    assert.equal(agents.calls.filter((c) => c.method === "sendMessages").length, 1, "nothing reached agents");
  });

  test("another service's certificate of the same CA may ask for health but not Invoke (PERMISSION_DENIED)", async () => {
    for (const name of ["agents", "operator", "runtime-worker"]) {
      const transport = createServiceTransport({ baseUrl: worker.url, tls: tlsOf(name) });
      const health = await createClient(Health, transport).check({ service: "runtime.v1.RuntimeService" });
      assert.equal(health.status, HealthCheckResponse_ServingStatus.SERVING, name);
      const err = await refused(invoke(transport));
      assert.equal(err.code, Code.PermissionDenied, `${name}: ${err.message}`);
      assert.equal(fromConnectError(err).reason, "caller_not_allowed");
    }
  });

  test("a spare's warm-up calls its throwaway server over mTLS with the worker's own certificate, and gets through", async () => {
    assert.equal(await warmUp(tlsOf("runtime-worker")), true);
    assert.equal(await warmUp(undefined), true, "INTERNAL_TLS=off");
  });

  test("python3-grpcio: the router's certificate gets through; none, another CA's or agents' is refused", {
    skip: !existsSync(python) && "no /usr/bin/python3",
  }, async (t) => {
    const run = (certOf?: { certFile: string; keyFile: string }, caFile = pki.files("runtime-router").caFile) =>
      new Promise<Record<string, string | number>>((resolve, reject) => {
        const args = [
          probe,
          worker.url.replace("https://", ""),
          caFile,
          ...(certOf ? [certOf.certFile, certOf.keyFile] : []),
        ];
        const child = execFile(python, args, { timeout: 60_000 }, (err, stdout, stderr) => {
          if (err) return reject(new Error(`${err.message}\n${stderr}`));
          resolve(JSON.parse(stdout));
        });
        child.stdin?.end(JSON.stringify({ session: SESSION, metadata: headers }));
      });
    let ok: Record<string, string | number>;
    try {
      ok = await run(pki.files("runtime-router"));
    } catch (err) {
      if (/No module named 'grpc'/.test(String(err)))
        return t.skip("python3-grpcio not installed (apt-get install -y python3-grpcio)");
      throw err;
    }
    assert.deepEqual(ok, { health: "OK", events: 2, invoke: "OK" });
    const none = await run();
    assert.equal(none.invoke, "UNAVAILABLE", JSON.stringify(none));
    assert.equal(none.health, "UNAVAILABLE");
    const otherCa = await run(foreign.files("runtime-router"));
    assert.equal(otherCa.invoke, "UNAVAILABLE", JSON.stringify(otherCa));
    const agentsCert = await run(pki.files("agents"));
    assert.equal(agentsCert.health, "OK");
    assert.equal(agentsCert.invoke, "PERMISSION_DENIED", JSON.stringify(agentsCert));
  });
});
