import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { InternalReason } from "@platform/errors";
import { Health } from "@platform/gen/grpc/health/v1/health_pb";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { pino } from "pino";
import { createServiceTransport } from "../client.ts";
import { requestInfoKey } from "../context.ts";
import { fromConnectError } from "../errors.ts";
import { testServer } from "../testing/fixture.ts";
import type { CallerPolicy } from "./callers.ts";
import { internalTlsFromEnv, loadServiceTls, type ServiceTls } from "./service-tls.ts";

const run = promisify(execFile);
const buf = fileURLToPath(new URL("../../../../node_modules/.bin/buf", import.meta.url));
const python = "/usr/bin/python3";
const probe = fileURLToPath(new URL("./grpcio_mtls_probe.py", import.meta.url));

const connectionFailure = [Code.Canceled, Code.Internal, Code.Unavailable];

const callers: CallerPolicy = {
  "rpctest.v1.LibraryService": { Echo: ["agents"], GetShelf: ["agents", "operator"] },
};

let pki: TestPki;
let foreign: TestPki;
const tlsOf = (name: string, from = () => pki) => loadServiceTls(from().env(name));

before(async () => {
  pki = await makeTestPki(["compute", "agents", "operator", "identity"]);
  foreign = await makeTestPki(["agents"]);
});
after(() => {
  pki.remove();
  foreign.remove();
});

describe("an internal listener with mutual TLS", () => {
  const seen: (string | undefined)[] = [];
  const record: Interceptor = (next) => (req) => {
    seen.push(req.contextValues.get(requestInfoKey)?.caller);
    return next(req);
  };
  let server: ReturnType<typeof testServer>["server"];
  let probeCalls: () => number;
  let url = "";
  let port = 0;
  before(async () => {
    const made = testServer({ internal: { tls: tlsOf("compute"), callers }, interceptors: [record] });
    server = made.server;
    probeCalls = () => made.probe.calls.get("getShelf") ?? 0;
    ({ url, port } = await server.listen());
  });
  after(() => server.close());

  const library = (tls: ServiceTls, expectServer?: string) =>
    createClient(LibraryService, createServiceTransport({ baseUrl: url, tls, expectServer }));
  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => assert.fail("the call went through"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConnectError, String(err));
    return err;
  };

  test("serves https and tells handlers the caller's service name", async () => {
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/);
    seen.length = 0;
    const res = await library(tlsOf("agents"), "compute").echo({ text: "hi" });
    assert.equal(res.text, "hi");
    assert.deepEqual(seen, ["agents"]);
  });

  test("a caller the allow-list does not name for the method gets PERMISSION_DENIED, before the handler", async () => {
    const operator = library(tlsOf("operator"));
    assert.equal((await operator.getShelf({ shelf: 1n })).name, "shelf 1");
    const before = probeCalls();
    const err = await refusal(library(tlsOf("identity")).getShelf({ shelf: 1n }));
    assert.equal(err.code, Code.PermissionDenied);
    assert.equal(fromConnectError(err).reason, InternalReason.callerNotAllowed);
    assert.match(err.rawMessage, /identity may not call rpctest\.v1\.LibraryService\/GetShelf/);
    assert.equal(probeCalls(), before);
    // A method the policy does not list, and a service it does not list.
    assert.equal((await refusal(operator.echo({ text: "x" }))).code, Code.PermissionDenied);
    assert.equal((await refusal(operator.listTags({}))).code, Code.PermissionDenied);
  });

  test("health answers any certificate of the CA", async () => {
    const health = createClient(Health, createServiceTransport({ baseUrl: url, tls: tlsOf("identity") }));
    assert.equal((await health.check({})).status, 1);
  });

  test("no client certificate, another CA's certificate, or plaintext: refused before any call", async () => {
    const before = probeCalls();
    const pem = pki.pem("agents");
    const noCert = createClient(
      LibraryService,
      createGrpcTransport({ baseUrl: url, sessionManager: new Http2SessionManager(url, undefined, { ca: pem.ca }) }),
    );
    assert.match((await refusal(noCert.getShelf({ shelf: 1n }))).message, /certificate required/);
    const other = tlsOf("agents", () => foreign);
    // The foreign certificate, with this CA trusted so the client accepts the server.
    const wrongCa = library({ ...other, ca: Buffer.from(pem.ca) });
    // TLS 1.3: the server's refusal reaches the client as a reset connection.
    assert.ok(connectionFailure.includes((await refusal(wrongCa.getShelf({ shelf: 1n }))).code));
    const plain = createClient(LibraryService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
    assert.ok(connectionFailure.includes((await refusal(plain.getShelf({ shelf: 1n }))).code));
    assert.equal(probeCalls(), before);
  });

  test("the client checks the server: another CA, or another service than expected, is refused", async () => {
    const trustsForeign = library({ ...tlsOf("agents"), ca: readFileSync(foreign.files("agents").caFile) });
    assert.match(
      (await refusal(trustsForeign.echo({ text: "x" }))).message,
      /self-signed certificate in certificate chain/,
    );
    const err = await refusal(library(tlsOf("agents"), "identity").echo({ text: "x" }));

    assert.match(err.message, /is "compute", not "identity"/);
  });

  test("Connect and gRPC-Web over HTTP/1.1 with TLS, same allow-list", async () => {
    const agents = tlsOf("agents");
    const transport = createConnectTransport({
      baseUrl: url,
      httpVersion: "1.1",
      nodeOptions: { ca: agents.ca, cert: agents.cert, key: agents.key },
    });
    assert.equal((await createClient(LibraryService, transport).echo({ text: "h1" })).text, "h1");
    const operator = tlsOf("operator");
    const denied = createConnectTransport({
      baseUrl: url,
      httpVersion: "1.1",
      nodeOptions: { ca: operator.ca, cert: operator.cert, key: operator.key },
    });
    assert.equal(
      (await refusal(createClient(LibraryService, denied).echo({ text: "h1" }))).code,
      Code.PermissionDenied,
    );
  });

  test("REST routes on the internal port obey the allow-list too", async () => {
    const get = (name: string) =>
      new Promise<number>((resolve, reject) => {
        const pem = pki.pem(name);
        const s = http2.connect(url, { ca: pem.ca, cert: pem.cert, key: pem.key });
        s.on("error", reject);
        const req = s.request({ ":method": "POST", ":path": "/v1/echo", "content-type": "application/json" });
        req.on("response", (h) => {
          resolve(Number(h[":status"]));
          s.close();
        });
        req.on("error", reject);
        req.end('{"text":"x"}');
      });
    assert.equal(await get("agents"), 200);
    assert.equal(await get("operator"), 403);
  });

  test("buf curl with --cacert/--cert/--key lists methods by reflection and calls one", async () => {
    const f = pki.files("operator");
    const tlsArgs = ["--cacert", f.caFile, "--cert", f.certFile, "--key", f.keyFile];
    const list = await run(buf, [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "--reflect",
      ...tlsArgs,
      "--list-methods",
      url,
    ]);
    assert.ok(list.stdout.includes("rpctest.v1.LibraryService/GetShelf"), list.stdout);
    const call = await run(buf, [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      ...tlsArgs,
      "-d",
      '{"shelf":"3"}',
      `${url}/rpctest.v1.LibraryService/GetShelf`,
    ]);
    assert.equal(JSON.parse(call.stdout).name, "shelf 3");
    await assert.rejects(
      run(buf, ["curl", "--protocol", "grpc", "--reflect", "--cacert", f.caFile, "--list-methods", url]),
    );
  });

  const hasPython = existsSync(python);
  test("python3-grpcio: refused without a client certificate or with another CA's, served with one", {
    skip: !hasPython && "no /usr/bin/python3",
  }, async (t) => {
    const target = `127.0.0.1:${port}`;
    const ca = pki.files("agents").caFile;
    const probeWith = async (...args: string[]) => {
      try {
        return JSON.parse((await run(python, [probe, target, ca, ...args], { timeout: 30_000 })).stdout);
      } catch (e) {
        if (String((e as { stderr?: string }).stderr).includes("No module named 'grpc'")) return undefined;
        throw e;
      }
    };
    const none = await probeWith();
    if (none === undefined) return t.skip("python3-grpcio not installed (apt-get install -y python3-grpcio)");
    assert.equal(none.health, "UNAVAILABLE");
    assert.equal(none.echo, "UNAVAILABLE");
    const other = foreign.files("agents");
    const wrong = await probeWith(other.certFile, other.keyFile);
    assert.equal(wrong.health, "UNAVAILABLE");
    assert.equal(wrong.echo, "UNAVAILABLE");
    const agents = pki.files("agents");
    const ok = await probeWith(agents.certFile, agents.keyFile);
    assert.equal(ok.health, "OK");
    assert.equal(ok.echo, "OK");
    assert.equal(Buffer.from(ok.echo_bytes, "hex").subarray(2, 4).toString(), "hi");
    const op = pki.files("operator");
    const denied = await probeWith(op.certFile, op.keyFile);
    assert.equal(denied.health, "OK");
    assert.equal(denied.echo, "PERMISSION_DENIED");
    assert.match(denied.echo_details, /operator may not call/);
  });
});

describe("a public listener (restOnly)", () => {
  const { server } = testServer({ restOnly: true });
  let url = "";
  before(async () => {
    ({ url } = await server.listen());
  });
  after(() => server.close());

  test("serves REST and the health endpoints", async () => {
    const res = await fetch(`${url}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"text":"r"}',
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { text: string }).text, "r");
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
  });

  test("refuses gRPC, Connect, gRPC health and reflection", async () => {
    const grpc = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    await assert.rejects(grpc.echo({ text: "g" }), (e: ConnectError) => e.code === Code.Unimplemented);
    const health = createClient(Health, createGrpcTransport({ baseUrl: url }));
    await assert.rejects(health.check({}), (e: ConnectError) => e.code === Code.Unimplemented);
    const connect = await fetch(`${url}/rpctest.v1.LibraryService/Echo`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"text":"c"}',
    });
    assert.equal(connect.status, 404);
    await assert.rejects(
      run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--reflect", "--list-methods", url]),
    );
  });
});

test("INTERNAL_TLS=off: an internal listener serves plaintext, checks no caller and says so at start", async () => {
  const lines: string[] = [];
  const logger = pino({ level: "warn" }, { write: (l: string) => lines.push(l) });
  const { server } = testServer({ internal: { tls: undefined, callers }, logger });
  const { url } = await server.listen();
  try {
    assert.match(url, /^http:/);
    const client = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    assert.equal((await client.listTags({ tags: ["a"] })).tags[0], "a");
    assert.ok(
      lines.some((l) => /"level":40/.test(l) && l.includes("INTERNAL_TLS=off")),
      lines.join("\n"),
    );
  } finally {
    await server.close();
  }
});

describe("TLS settings", () => {
  test("none set and INTERNAL_TLS not off: refused with the three names", () => {
    assert.throws(() => internalTlsFromEnv({}), /TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE.*INTERNAL_TLS=off/);
    assert.equal(internalTlsFromEnv({ INTERNAL_TLS: "off" }), undefined);
    assert.throws(() => internalTlsFromEnv({ INTERNAL_TLS: "no" }), /INTERNAL_TLS must be "on" or "off"/);
    assert.throws(
      () => internalTlsFromEnv({ TLS_CA_FILE: pki.files("agents").caFile }),
      /TLS_CERT_FILE, TLS_KEY_FILE must be set/,
    );
  });

  test("the files must belong together and name the expected service", () => {
    const agents = pki.files("agents");
    const env = { TLS_CA_FILE: agents.caFile, TLS_CERT_FILE: agents.certFile, TLS_KEY_FILE: agents.keyFile };
    assert.equal(internalTlsFromEnv(env, "agents")?.name, "agents");
    assert.throws(() => loadServiceTls(env, "compute"), /certificate of "agents", not of "compute"/);
    assert.throws(() => loadServiceTls({ ...env, TLS_KEY_FILE: pki.files("compute").keyFile }), /not the private key/);
    assert.throws(
      () => loadServiceTls({ ...env, TLS_CA_FILE: foreign.files("agents").caFile }),
      /not signed by the CA/,
    );
    assert.throws(() => loadServiceTls({ ...env, TLS_CERT_FILE: "/nonexistent" }), /TLS_CERT_FILE: cannot read/);
  });
});
