import { isIP } from "node:net";
import { join } from "node:path";
import { SEMI_SPACE_MIB } from "@platform/config";
import { type ServiceTlsFiles, tlsEnv } from "@platform/pki";
import type { Endpoints } from "../cli/endpoints.ts";
import type { LauncherConfig } from "./config.ts";
import { PLATFORM_ENTRIES } from "./bundle-cache.mjs";
import type { LocalSecrets } from "./secrets.ts";
import type { ServiceSpec } from "./supervisor.ts";

const root = new URL("../../../..", import.meta.url).pathname;

/** Each service's entry, by the name the launcher gives it (from bundle-cache.mjs, which bin/start.mjs reads). */
export const SERVICE_ENTRIES = {
  identity: PLATFORM_ENTRIES.identity,
  compute: PLATFORM_ENTRIES.compute,
  agents: PLATFORM_ENTRIES.agents,
  runtime: PLATFORM_ENTRIES.runtime,
  e2b: PLATFORM_ENTRIES.e2b,
} as const;

const young = `--max-semi-space-size=${SEMI_SPACE_MIB}`;

/**
 * Identity and agents run with V8's allocation-site pretenuring off: with it,
 * an allocation site whose objects once survived (start-up, a stall's
 * backlog) allocates its later objects in the old generation, so the
 * short-lived objects of a verify call went there. At 1,000 VerifyAPIKey
 * calls/s identity's old space grew ~8 MB/s, a mark-compact came every ~5 s
 * (10-25 ms pauses) and scavenges were slower (README, Memory). Agents: the
 * sites of what an SSE follower keeps for hours (its response, call, follow)
 * are the sites of what every request drops, so a burst of follows left the
 * old space sparse; 40 s after 10,000 opens, V8's free heap space was
 * 4.3-5.8 KiB a stream with it, 1.2-3.9 without (README, Memory). Compute was not
 * measured to gain from it.
 */
const pretenuring = "--no-allocation-site-pretenuring";

/**
 * The Node flags each service runs with (the bench's service processes run
 * with them too). The services on embedded PGlite (a WebAssembly build of
 * PostgreSQL) keep its code in Liftoff, V8's baseline WASM compiler:
 * optimizing it too cost ~60 MiB of resident code per process, and more CPU
 * than it saved over 15,000 queries (README, Memory). Identity also runs
 * without allocation-site pretenuring (above).
 */
export const SERVICE_NODE_ARGS: Readonly<Record<keyof typeof SERVICE_ENTRIES, readonly string[]>> = {
  identity: ["--liftoff-only", young, pretenuring],
  compute: ["--liftoff-only", young],
  agents: ["--liftoff-only", young, pretenuring],
  runtime: [young],
  e2b: [young],
};

/**
 * Where the embedded services keep their PGlite clusters under the launcher's
 * data directory: identity's and agents' data directories (below), compute's
 * pglite/ in its own (compute/src/app.ts).
 */
export function embeddedDatabaseDirs(dataDir: string): string[] {
  return [join(dataDir, "identity"), join(dataDir, "compute", "pglite"), join(dataDir, "agents")];
}

/**
 * The four services of the embedded shape, in start order, with their
 * settings. `tls(name)` is a service's certificate in the launcher's PKI:
 * each service gets its own (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE), the
 * router also the tenant workers' (RUNTIME_WORKER_TLS_CERT_FILE/_KEY_FILE).
 * Internal ports speak mutual TLS only, so their endpoints are https.
 */
export function platformServices(
  config: LauncherConfig,
  secrets: LocalSecrets,
  tls: (name: string) => ServiceTlsFiles,
): { services: ServiceSpec[]; endpoints: Endpoints } {
  const { host, ports, dataDir } = config;
  // Where to connect: a wildcard listening address is reached on loopback
  // (and 127.0.0.1 is in every certificate, 0.0.0.0 in none).
  const to = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "[::1]" : host.includes(":") ? `[${host}]` : host;
  const url = (port: number) => `http://${to}:${port}`;
  // The address the router's connections to identity come from (a name such as localhost: loopback's).
  const bare = to.replace(/^\[|\]$/g, "");
  const routerAddress = isIP(bare) ? bare : "127.0.0.1,::1";
  const internal = (port: number) => `https://${to}:${port}`;
  const endpoints: Endpoints = {
    identity: url(ports.identityRest),
    identityGrpc: internal(ports.identityGrpc),
    computeGrpc: internal(ports.compute),
    agents: url(ports.agents),
    agentsGrpc: internal(ports.agentsGrpc),
    router: url(ports.router),
  };
  // The files under logs/ get info and up (debug with PLATFORM_LOG_LEVEL=debug); the console shows what PLATFORM_LOG_LEVEL asks.
  const common = {
    LOG_LEVEL: process.env.LOG_LEVEL ?? (config.log.level === "debug" ? "debug" : "info"),
    HOST: host,
    ...(config.otelEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: config.otelEndpoint } : {}),
  };
  const worker = tls("runtime-worker");
  const services: ServiceSpec[] = [
    {
      name: "identity",
      entry: SERVICE_ENTRIES.identity,
      nodeArgs: [...SERVICE_NODE_ARGS.identity],
      // The internal port listens last: once it answers, both do.
      readyUrl: `${endpoints.identityGrpc}/livez`,
      env: {
        ...common,
        ...tlsEnv(tls("identity")),
        SERVER_PORT: String(ports.identityRest),
        IDENTITY_GRPC_PORT: String(ports.identityGrpc),
        IDENTITY_AUTHKEY_KEK: secrets.kek,
        IDENTITY_DATA_DIR: join(dataDir, "identity"),
        BOOTSTRAP_OWNER_EMAIL: config.ownerEmail,
        BOOTSTRAP_OWNER_PASSWORD: secrets.ownerPassword,
        BOOTSTRAP_ORG_NAME: config.ownerOrg,
        // The router below reaches identity at `to` and so comes from that address: identity believes the
        // X-Forwarded-For it sets (the console's sign-ins throttled per client address), no one else's.
        LOGIN_TRUSTED_PROXIES: routerAddress,
      },
    },
    {
      name: "compute",
      entry: SERVICE_ENTRIES.compute,
      nodeArgs: [...SERVICE_NODE_ARGS.compute],
      readyUrl: `${endpoints.computeGrpc}/livez`,
      // Ctrl-C stops the sandboxes too; a session's next tool call after a
      // restart gets a fresh sandbox state (FAILED ones are not revived).
      env: {
        ...common,
        ...tlsEnv(tls("compute")),
        COMPUTE_PORT: String(ports.compute),
        COMPUTE_DATA_DIR: join(dataDir, "compute"),
        COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
      },
    },
    {
      name: "agents",
      entry: SERVICE_ENTRIES.agents,
      nodeArgs: [...SERVICE_NODE_ARGS.agents],
      readyUrl: `${endpoints.agentsGrpc}/livez`,
      env: {
        ...common,
        ...tlsEnv(tls("agents")),
        AGENTS_PORT: String(ports.agents),
        AGENTS_GRPC_PORT: String(ports.agentsGrpc),
        AGENTS_DATA_DIR: join(dataDir, "agents"),
        ...(secrets.agentsSecretsKey ? { AGENTS_SECRETS_KEY: secrets.agentsSecretsKey } : {}),
        IDENTITY_GRPC_URL: endpoints.identityGrpc!,
        COMPUTE_GRPC_URL: endpoints.computeGrpc!,
      },
    },
    {
      name: "runtime",
      entry: SERVICE_ENTRIES.runtime,
      nodeArgs: [...SERVICE_NODE_ARGS.runtime],
      readyUrl: `${endpoints.router}/livez`,
      env: {
        ...common,
        ...tlsEnv(tls("runtime-router")),
        RUNTIME_WORKER_TLS_CERT_FILE: worker.certFile,
        RUNTIME_WORKER_TLS_KEY_FILE: worker.keyFile,
        ROUTER_PORT: String(ports.router),
        RUNTIME_WORKER_HOST: host,
        RUNTIME_DATA_DIR: join(dataDir, "runtime"),
        IDENTITY_GRPC_URL: endpoints.identityGrpc!,
        AGENTS_GRPC_URL: endpoints.agentsGrpc!,
        // One origin for the web console and the REST/SSE APIs it calls.
        ROUTER_IDENTITY_URL: endpoints.identity,
        ROUTER_AGENTS_URL: endpoints.agents,
        ROUTER_CONSOLE_DIR: join(root, "packages/console/dist"),
      },
    },
  ];
  if (ports.e2b > 0) {
    endpoints.e2b = url(ports.e2b);
    services.push({
      name: "e2b",
      entry: SERVICE_ENTRIES.e2b,
      nodeArgs: [...SERVICE_NODE_ARGS.e2b],
      readyUrl: `${url(ports.e2b)}/livez`,
      env: {
        ...common,
        ...tlsEnv(tls("e2b")),
        E2B_PORT: String(ports.e2b),
        COMPUTE_GRPC_URL: endpoints.computeGrpc!,
        IDENTITY_GRPC_URL: endpoints.identityGrpc!,
      },
    });
  }
  return { services, endpoints };
}
