import {
  bool,
  ConfigError,
  custom,
  type Env,
  host,
  int,
  logLevel,
  oneOf,
  port,
  readSettings,
  text,
  url,
} from "@platform/config";
import {
  corsAllowedOriginsSetting,
  loadServiceTls,
  metricsTokenSetting,
  otelEndpointSetting,
  TlsSettingsError,
} from "@platform/rpc/settings";
import { internalTlsSetting, internalUrlSetting, type ServiceTls } from "../config/tls.ts";

/** The certificate name the router calls identity and the tenant workers with. */
export const ROUTER_TLS_NAME = "runtime-router";

export type RouterConfig = {
  port: number;
  host: string;
  identityUrl: string;
  /**
   * The router's certificate (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE naming
   * runtime-router) for its calls to identity and the workers; undefined only
   * with INTERNAL_TLS=off.
   */
  tls: ServiceTls | undefined;
  logLevel: string;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where spans are exported (OTLP/HTTP), by the router and its local workers; unset: none. */
  otelEndpoint?: string;
  maxWaitersPerTenant: number;
  /** Cold-start wait for a woken worker (spec: 10 s). */
  coldStartWaitMs: number;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the router (default none). */
  corsAllowedOrigins: string[];
  /** METRICS_TOKEN: the bearer token of GET /metrics; unset: not served. */
  metricsToken?: string;
  /** ROUTER_IDENTITY_URL: identity's public REST port, whose /v1 paths the router passes through. */
  identityRestUrl?: string;
  /** ROUTER_AGENTS_URL: agents' public REST/SSE port, whose /v1 paths the router passes through. */
  agentsRestUrl?: string;
  /** ROUTER_CONSOLE_DIR: the web console's built files, served at `/`. */
  consoleDir: string;
} & (
  | {
      orchestrator: "local";
      dataDir: string;
      /** Passed to every worker as AGENTS_GRPC_URL. */
      agentsUrl: string;
      workerHost: string;
      /** Keep a pre-started spare worker for cold starts (RUNTIME_SPARE_WORKER, default on). */
      spareWorker: boolean;
      /**
       * The workers' certificate (RUNTIME_WORKER_TLS_CERT_FILE and _KEY_FILE,
       * naming runtime-worker, from the router's CA), handed to every worker
       * as its TLS_* settings; undefined with INTERNAL_TLS=off.
       */
      workerTlsFiles: { caFile: string; certFile: string; keyFile: string } | undefined;
    }
  | {
      orchestrator: "kubernetes";
      namespace: string;
      workerTemplatePath: string;
    }
);

/** The router's settings for either orchestrator. */
export const ROUTER_SETTINGS = {
  tls: internalTlsSetting(ROUTER_TLS_NAME),
  identityUrl: internalUrlSetting("IDENTITY_GRPC_URL", "identity's gRPC port (`https://` with mutual TLS)"),
  port: port("ROUTER_PORT", { default: 8080, doc: "the public port" }),
  host: host(),
  logLevel: logLevel(),
  otelEndpoint: otelEndpointSetting(
    "OTLP/HTTP base URL traces are exported to (`/v1/traces` is appended), by the router and (local) the workers it starts; unset: no trace export",
  ),
  maxWaitersPerTenant: int("RUNTIME_MAX_WAITERS_PER_TENANT", {
    default: 32,
    min: 1,
    doc: "requests waiting for one tenant's worker",
  }),
  // The spec's 10 s; slow machines (a loaded CI box starting node + tsx) may raise it.
  coldStartWaitMs: int("RUNTIME_COLD_START_WAIT_MS", {
    default: 10_000,
    min: 1,
    doc: "the spec's 10 s for a woken worker; only for machines too slow to start a worker in time",
  }),
  corsAllowedOrigins: corsAllowedOriginsSetting(
    "origins whose pages may call the router (comma-separated); none by default, see `@platform/rpc`",
  ),
  metricsToken: metricsTokenSetting(
    "bearer token a scraper must present for `GET /metrics` (Prometheus text format) on the router's port and (local) on the tenant workers it starts, which also ask for a certificate of the CA; at least 32 characters; unset: `/metrics` is not served (404)",
  ),
  identityRestUrl: url("ROUTER_IDENTITY_URL", {
    protocols: ["http:", "https:"],
    doc: "identity's public REST port; its `/v1/...` paths (as its OpenAPI document names them) are passed through on the router's port, for the web console; unset: not passed",
  }),
  agentsRestUrl: url("ROUTER_AGENTS_URL", {
    protocols: ["http:", "https:"],
    doc: "agents' public REST/SSE port; its `/v1/...` paths are passed through (streams unbuffered), for the web console; unset: not passed",
  }),
  consoleDir: text("ROUTER_CONSOLE_DIR", {
    default: "packages/console/dist",
    doc: "the web console's built files (`pnpm --filter @platform/console build`), served at `/` with a strict Content-Security-Policy; a directory without `index.html`: no console",
  }),
  orchestrator: oneOf("RUNTIME_ORCHESTRATOR", ["local", "kubernetes"], {
    default: "local",
    doc: "where tenant workers run; the rows below say which one reads them",
  }),
};

const WORKER_CERT = "RUNTIME_WORKER_TLS_CERT_FILE";
const WORKER_KEY = "RUNTIME_WORKER_TLS_KEY_FILE";

/** Read with RUNTIME_ORCHESTRATOR=local only. */
export const LOCAL_ORCHESTRATOR_SETTINGS = {
  agentsUrl: internalUrlSetting(
    "AGENTS_GRPC_URL",
    "local: agents' internal port (`https://` with mutual TLS), given to every worker",
  ),
  dataDir: text("RUNTIME_DATA_DIR", { default: ".data/runtime", doc: "local: holds `orchestrator.json`" }),
  workerHost: text("RUNTIME_WORKER_HOST", { default: "127.0.0.1", doc: "local: the workers' listening address" }),
  spareWorker: bool("RUNTIME_SPARE_WORKER", {
    default: true,
    shown: "1",
    doc: "local: keep a pre-started spare worker for cold starts; `0` keeps none",
  }),
  workerTlsFiles: custom([WORKER_CERT, WORKER_KEY], {
    shown: "required",
    doc: "local: the workers' `runtime-worker` certificate and key, from the router's CA; not read with `INTERNAL_TLS=off`",
    read: (env) => (env.INTERNAL_TLS === "off" ? undefined : workerTlsFiles(env)),
  }),
};

/** Read with RUNTIME_ORCHESTRATOR=kubernetes only. */
export const KUBERNETES_ORCHESTRATOR_SETTINGS = {
  namespace: text("RUNTIME_NAMESPACE", { required: true, doc: "kubernetes: the workers' namespace" }),
  workerTemplatePath: text("RUNTIME_WORKER_TEMPLATE", {
    required: true,
    doc: "kubernetes: path of the JSON worker template; its `tlsSecretName` (default `runtime-worker-tls`) is the workers' certificate Secret",
  }),
};

/** Every row of the router's listing, in order. */
export const ROUTER_LISTING = {
  ...ROUTER_SETTINGS,
  ...LOCAL_ORCHESTRATOR_SETTINGS,
  ...KUBERNETES_ORCHESTRATOR_SETTINGS,
};

/** The router's settings, parsed once at start-up; a bad one throws ConfigError naming it. */
export function routerConfig(env: Env): RouterConfig {
  const { orchestrator, ...common } = readSettings(ROUTER_SETTINGS, env);
  if (orchestrator === "local") return { ...common, orchestrator, ...readSettings(LOCAL_ORCHESTRATOR_SETTINGS, env) };
  return { ...common, orchestrator, ...readSettings(KUBERNETES_ORCHESTRATOR_SETTINGS, env) };
}

function required(env: Env, key: string): string {
  const v = env[key]?.trim();
  if (!v) throw new ConfigError(key, `${key} is required`);
  return v;
}

/**
 * The certificate the local orchestrator hands its workers, checked here so
 * a wrong file stops the router at start rather than every worker later: it
 * must come from the router's CA, match its key and name runtime-worker.
 */
function workerTlsFiles(env: Env): { caFile: string; certFile: string; keyFile: string } {
  const caFile = required(env, "TLS_CA_FILE");
  const certFile = required(env, WORKER_CERT);
  const keyFile = required(env, WORKER_KEY);
  try {
    loadServiceTls({ TLS_CA_FILE: caFile, TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile }, "runtime-worker");
  } catch (err) {
    if (!(err instanceof TlsSettingsError)) throw err;
    // Its messages name the service's own settings; these are the workers'.
    const message = err.message.replaceAll("TLS_CERT_FILE", WORKER_CERT).replaceAll("TLS_KEY_FILE", WORKER_KEY);
    throw new ConfigError(message.includes(WORKER_KEY) ? WORKER_KEY : WORKER_CERT, message);
  }
  return { caFile, certFile, keyFile };
}
