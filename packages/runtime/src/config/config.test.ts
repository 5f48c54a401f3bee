import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ConfigError } from "@platform/config";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { routerConfig } from "../router/config.ts";
import { workerConfig } from "../worker/config.ts";

const U = "0a1b2c3d-0000-4000-8000-000000000001";

function rejects(fn: () => unknown, name: RegExp): void {
  assert.throws(fn, (e) => e instanceof ConfigError && name.test(e.message));
}

describe("router settings", () => {
  const base = {
    IDENTITY_GRPC_URL: "http://127.0.0.1:50051",
    AGENTS_GRPC_URL: "http://127.0.0.1:8082/",
    INTERNAL_TLS: "off",
  };

  test("defaults: local orchestrator, port 8080, 32 waiters", () => {
    const c = routerConfig(base);
    assert.equal(c.orchestrator, "local");
    assert.equal(c.port, 8080);
    assert.equal(c.host, "127.0.0.1");
    assert.equal(c.maxWaitersPerTenant, 32);
    assert.equal(c.coldStartWaitMs, 10_000);
    assert.equal(c.logLevel, "info");
    if (c.orchestrator === "local") {
      assert.equal(c.agentsUrl, "http://127.0.0.1:8082");
      assert.equal(c.dataDir, ".data/runtime");
      assert.equal(c.spareWorker, true);
    }
  });

  test("RUNTIME_SPARE_WORKER turns the local orchestrator's spare worker off", () => {
    for (const [raw, want] of [
      ["0", false],
      ["false", false],
      ["off", false],
      ["1", true],
      ["TRUE", true],
    ] as const) {
      const c = routerConfig({ ...base, RUNTIME_SPARE_WORKER: raw });
      assert.equal(c.orchestrator === "local" && c.spareWorker, want, raw);
    }
  });

  test("every bad or missing setting is named", () => {
    rejects(() => routerConfig({ AGENTS_GRPC_URL: "http://x:1", INTERNAL_TLS: "off" }), /IDENTITY_GRPC_URL/);
    rejects(() => routerConfig({ ...base, IDENTITY_GRPC_URL: "identity:50051" }), /IDENTITY_GRPC_URL/);
    rejects(() => routerConfig({ IDENTITY_GRPC_URL: "http://x:1", INTERNAL_TLS: "off" }), /AGENTS_GRPC_URL/);
    rejects(() => routerConfig({ ...base, ROUTER_PORT: "70000" }), /ROUTER_PORT/);
    rejects(() => routerConfig({ ...base, LOG_LEVEL: "loud" }), /LOG_LEVEL/);
    rejects(() => routerConfig({ ...base, RUNTIME_MAX_WAITERS_PER_TENANT: "0" }), /RUNTIME_MAX_WAITERS_PER_TENANT/);
    rejects(() => routerConfig({ ...base, RUNTIME_ORCHESTRATOR: "docker" }), /RUNTIME_ORCHESTRATOR/);
    rejects(() => routerConfig({ ...base, RUNTIME_COLD_START_WAIT_MS: "soon" }), /RUNTIME_COLD_START_WAIT_MS/);
    rejects(() => routerConfig({ ...base, RUNTIME_SPARE_WORKER: "maybe" }), /RUNTIME_SPARE_WORKER/);
    rejects(() => routerConfig({ ...base, RUNTIME_ORCHESTRATOR: "kubernetes" }), /RUNTIME_NAMESPACE/);
    rejects(
      () => routerConfig({ ...base, RUNTIME_ORCHESTRATOR: "kubernetes", RUNTIME_NAMESPACE: "platform" }),
      /RUNTIME_WORKER_TEMPLATE/,
    );
  });

  test("the kubernetes shape needs no agents URL (the worker template carries it)", () => {
    const c = routerConfig({
      IDENTITY_GRPC_URL: "http://identity:50051",
      INTERNAL_TLS: "off",
      RUNTIME_ORCHESTRATOR: "kubernetes",
      RUNTIME_NAMESPACE: "platform",
      RUNTIME_WORKER_TEMPLATE: "/etc/runtime/worker-template.json",
    });
    assert.equal(c.orchestrator, "kubernetes");
  });
});

describe("worker settings", () => {
  const base = { TENANT_ID: U.toUpperCase(), ORG_ID: U, AGENTS_GRPC_URL: "http://agents:8082", INTERNAL_TLS: "off" };

  test("defaults: port 50051 on loopback; ids lower-cased", () => {
    const c = workerConfig(base);
    assert.equal(c.port, 50051);
    assert.equal(c.host, "127.0.0.1");
    assert.equal(c.tenantId, U);
    assert.equal(c.exitWithStdin, false);
  });

  test("TENANT_ID, ORG_ID and AGENTS_GRPC_URL are required and checked", () => {
    rejects(() => workerConfig({ ...base, TENANT_ID: undefined }), /TENANT_ID/);
    rejects(() => workerConfig({ ...base, TENANT_ID: "acme" }), /TENANT_ID/);
    rejects(() => workerConfig({ ...base, ORG_ID: "" }), /ORG_ID/);
    rejects(() => workerConfig({ ...base, AGENTS_GRPC_URL: undefined }), /AGENTS_GRPC_URL/);
    rejects(() => workerConfig({ ...base, PORT: "-1" }), /PORT/);
  });
});

describe("mutual TLS settings", () => {
  let pki: TestPki;
  before(async () => {
    pki = await makeTestPki(["runtime-router", "runtime-worker", "agents"]);
  });
  after(() => pki.remove());
  const router = () => ({
    IDENTITY_GRPC_URL: "https://127.0.0.1:50051",
    AGENTS_GRPC_URL: "https://127.0.0.1:50052",
    ...pki.env("runtime-router"),
    RUNTIME_WORKER_TLS_CERT_FILE: pki.files("runtime-worker").certFile,
    RUNTIME_WORKER_TLS_KEY_FILE: pki.files("runtime-worker").keyFile,
  });
  const worker = () => ({
    TENANT_ID: U,
    ORG_ID: U,
    AGENTS_GRPC_URL: "https://127.0.0.1:50052",
    ...pki.env("runtime-worker"),
  });

  test("secure by default: without TLS_* (and without INTERNAL_TLS=off) the router and a worker refuse to start, naming the settings", () => {
    const names = /TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE.*INTERNAL_TLS=off/;
    rejects(
      () => routerConfig({ IDENTITY_GRPC_URL: "http://127.0.0.1:1", AGENTS_GRPC_URL: "http://127.0.0.1:2" }),
      names,
    );
    rejects(() => workerConfig({ TENANT_ID: U, ORG_ID: U, AGENTS_GRPC_URL: "http://127.0.0.1:2" }), names);
  });

  test("the router reads its certificate and the workers'; each must name its service", () => {
    const c = routerConfig(router());
    assert.equal(c.tls?.name, "runtime-router");
    assert.ok(c.orchestrator === "local");
    assert.deepEqual(c.workerTlsFiles, pki.files("runtime-worker"));
    rejects(
      () => routerConfig({ ...router(), ...pki.env("agents") }),
      /TLS_CERT_FILE.*"agents", not .*"runtime-router"/,
    );
    rejects(
      () => routerConfig({ ...router(), RUNTIME_WORKER_TLS_CERT_FILE: undefined }),
      /RUNTIME_WORKER_TLS_CERT_FILE is required/,
    );
    rejects(
      () =>
        routerConfig({
          ...router(),
          RUNTIME_WORKER_TLS_CERT_FILE: pki.files("agents").certFile,
          RUNTIME_WORKER_TLS_KEY_FILE: pki.files("agents").keyFile,
        }),
      /RUNTIME_WORKER_TLS_CERT_FILE.*"agents", not .*"runtime-worker"/,
    );
    rejects(
      () => routerConfig({ ...router(), RUNTIME_WORKER_TLS_KEY_FILE: pki.files("agents").keyFile }),
      /RUNTIME_WORKER_TLS_KEY_FILE is not the private key/,
    );
    assert.equal(workerConfig(worker()).tls?.name, "runtime-worker");
    rejects(
      () => workerConfig({ ...worker(), ...pki.env("runtime-router") }),
      /"runtime-router", not .*"runtime-worker"/,
    );
  });

  test("with TLS an internal URL must be https (a plaintext call would carry tenant credentials); without it, http", () => {
    rejects(
      () => routerConfig({ ...router(), IDENTITY_GRPC_URL: "http://127.0.0.1:50051" }),
      /IDENTITY_GRPC_URL must be an https/,
    );
    rejects(
      () => routerConfig({ ...router(), AGENTS_GRPC_URL: "http://127.0.0.1:50052" }),
      /AGENTS_GRPC_URL must be an https/,
    );
    rejects(
      () => workerConfig({ ...worker(), AGENTS_GRPC_URL: "http://127.0.0.1:50052" }),
      /AGENTS_GRPC_URL must be an https/,
    );
    rejects(() => workerConfig({ ...worker(), INTERNAL_TLS: "off" }), /AGENTS_GRPC_URL must be an http:/);
  });
});
