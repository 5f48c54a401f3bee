import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { loadLauncherConfig } from "./config.ts";
import { SEMI_SPACE_MIB } from "@platform/config";
import { platformServices, SERVICE_NODE_ARGS } from "./services.ts";

let pki: TestPki;
before(async () => {
  pki = await makeTestPki();
});
after(() => pki.remove());

const secrets = { kek: "00".repeat(32), ownerPassword: "p", createdAt: "" };
const cnOf = (file: string) => new X509Certificate(readFileSync(file)).subject;

test("every service gets its own certificate; internal endpoints are https; the router gets the workers' too", () => {
  const { services, endpoints } = platformServices(loadLauncherConfig({}), secrets, pki.files);
  assert.deepEqual(endpoints, {
    identity: "http://127.0.0.1:8081",
    identityGrpc: "https://127.0.0.1:50051",
    computeGrpc: "https://127.0.0.1:50052",
    agents: "http://127.0.0.1:8082",
    agentsGrpc: "https://127.0.0.1:50053",
    router: "http://127.0.0.1:8080",
  });
  const byName = new Map(services.map((s) => [s.name, s.env]));
  for (const [service, cert] of [
    ["identity", "identity"],
    ["compute", "compute"],
    ["agents", "agents"],
    ["runtime", "runtime-router"],
  ] as const) {
    const env = byName.get(service)!;
    assert.equal(cnOf(env.TLS_CERT_FILE!), `CN=${cert}`, service);
    assert.equal(env.TLS_KEY_FILE, pki.files(cert).keyFile, service);
    assert.equal(env.TLS_CA_FILE, pki.files(cert).caFile, service);
    assert.equal(env.INTERNAL_TLS, undefined, service);
  }
  const router = byName.get("runtime")!;
  assert.equal(cnOf(router.RUNTIME_WORKER_TLS_CERT_FILE!), "CN=runtime-worker");
  assert.equal(router.RUNTIME_WORKER_TLS_KEY_FILE, pki.files("runtime-worker").keyFile);
  assert.equal(router.IDENTITY_GRPC_URL, "https://127.0.0.1:50051");
  assert.equal(router.AGENTS_GRPC_URL, "https://127.0.0.1:50053");
  assert.equal(byName.get("agents")!.AGENTS_GRPC_PORT, "50053");
  assert.equal(byName.get("agents")!.COMPUTE_GRPC_URL, "https://127.0.0.1:50052");
  // The internal ports are asked for readiness (over mutual TLS).
  for (const s of services.filter((x) => x.name !== "runtime")) assert.match(s.readyUrl, /^https:/, s.name);
});

test("the e2b service starts only with PLATFORM_E2B_PORT, as the e2b certificate, reaching compute and identity over mutual TLS", () => {
  assert.equal(
    platformServices(loadLauncherConfig({}), secrets, pki.files).services.some((s) => s.name === "e2b"),
    false,
  );
  const { services, endpoints } = platformServices(
    loadLauncherConfig({ PLATFORM_E2B_PORT: "3030" }),
    secrets,
    pki.files,
  );
  assert.equal(endpoints.e2b, "http://127.0.0.1:3030");
  const e2b = services.find((s) => s.name === "e2b")!;
  assert.equal(cnOf(e2b.env.TLS_CERT_FILE!), "CN=e2b");
  assert.equal(e2b.env.E2B_PORT, "3030");
  assert.equal(e2b.env.HOST, "127.0.0.1");
  assert.equal(e2b.env.COMPUTE_GRPC_URL, "https://127.0.0.1:50052");
  assert.equal(e2b.env.IDENTITY_GRPC_URL, "https://127.0.0.1:50051");
  assert.equal(e2b.readyUrl, "http://127.0.0.1:3030/livez");
});

test("a wildcard PLATFORM_HOST is reached on loopback, which every certificate names", () => {
  const { endpoints } = platformServices(loadLauncherConfig({ PLATFORM_HOST: "0.0.0.0" }), secrets, pki.files);
  assert.equal(endpoints.identityGrpc, "https://127.0.0.1:50051");
  assert.equal(endpoints.router, "http://127.0.0.1:8080");
  const v6 = platformServices(loadLauncherConfig({ PLATFORM_HOST: "::1" }), secrets, pki.files).endpoints;
  assert.equal(v6.computeGrpc, "https://[::1]:50052");
});

test("OTEL_EXPORTER_OTLP_ENDPOINT is validated once and given to every service; unset, to none", () => {
  const endpoint = "http://127.0.0.1:4318";
  const on = platformServices(loadLauncherConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }), secrets, pki.files);
  assert.equal(on.services.length, 4);
  for (const s of on.services) assert.equal(s.env.OTEL_EXPORTER_OTLP_ENDPOINT, endpoint, s.name);
  const off = platformServices(loadLauncherConfig({}), secrets, pki.files);
  for (const s of off.services) assert.equal(s.env.OTEL_EXPORTER_OTLP_ENDPOINT, undefined, s.name);
  assert.throws(
    () => loadLauncherConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }),
    /OTEL_EXPORTER_OTLP_ENDPOINT/,
  );
});

test("identity believes X-Forwarded-For from the router's own address only (LOGIN_TRUSTED_PROXIES)", () => {
  const trusted = (env: Record<string, string>) =>
    platformServices(loadLauncherConfig(env), secrets, pki.files).services.find((s) => s.name === "identity")!.env
      .LOGIN_TRUSTED_PROXIES;
  assert.equal(trusted({}), "127.0.0.1");
  // A wildcard is reached on loopback, so the router comes from there; a given address is the router's source.
  assert.equal(trusted({ PLATFORM_HOST: "0.0.0.0" }), "127.0.0.1");
  assert.equal(trusted({ PLATFORM_HOST: "::" }), "::1");
  assert.equal(trusted({ PLATFORM_HOST: "192.0.2.10" }), "192.0.2.10");
  assert.equal(trusted({ PLATFORM_HOST: "localhost" }), "127.0.0.1,::1");
});

test("every service bounds V8's semi-space; those on embedded PGlite also run with --liftoff-only, the router (no database) without; identity and agents without allocation-site pretenuring", () => {
  const { services } = platformServices(loadLauncherConfig({}), secrets, pki.files);
  const args = Object.fromEntries(services.map((s) => [s.name, s.nodeArgs ?? []]));
  const young = `--max-semi-space-size=${SEMI_SPACE_MIB}`;
  for (const name of ["identity", "agents"])
    assert.deepEqual(args[name], ["--liftoff-only", young, "--no-allocation-site-pretenuring"], name);
  assert.deepEqual(args.compute, ["--liftoff-only", young]);
  assert.deepEqual(args.runtime, [young]);
});

test("this Node accepts every service's flags (an unknown V8 flag is a bad option: the service would not start)", () => {
  for (const [name, args] of Object.entries(SERVICE_NODE_ARGS)) {
    const r = spawnSync(process.execPath, [...args, "-e", "process.stdout.write('up')"], { encoding: "utf8" });
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    assert.equal(r.stdout, "up", name);
  }
});
