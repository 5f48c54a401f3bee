import { ConfigError, custom, type Env, host, logLevel, port, raw, readSettings } from "@platform/config";
import { isUuid } from "@platform/errors";
import { metricsTokenSetting, otelEndpointSetting } from "@platform/rpc";
import { internalTlsSetting, internalUrlSetting, type ServiceTls } from "../config/tls.ts";

/** The certificate name a tenant worker serves and calls with. */
export const WORKER_TLS_NAME = "runtime-worker";
/** The only caller of a worker's RuntimeService: the router. */
export const WORKER_CALLERS = ["runtime-router"] as const;

export interface WorkerConfig {
  tenantId: string;
  orgId: string;
  /** Base URL of the agents service's internal gRPC port (https:// with TLS). */
  agentsUrl: string;
  /**
   * Its certificate (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE, naming
   * runtime-worker): it serves RuntimeService over mutual TLS to the router
   * only and calls agents with it. Undefined only with INTERNAL_TLS=off.
   */
  tls: ServiceTls | undefined;
  port: number;
  host: string;
  logLevel: string;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where spans are exported (OTLP/HTTP); unset: none. */
  otelEndpoint?: string;
  /** METRICS_TOKEN: the bearer token of GET /metrics; unset: not served. */
  metricsToken?: string;
  /**
   * Exit when stdin closes: the local orchestrator holds the other end, so a
   * worker never outlives its router, even one killed with SIGKILL.
   */
  exitWithStdin: boolean;
}

function uuid(name: string, doc: string) {
  return custom(name, {
    shown: "required",
    doc,
    read: (env) => {
      const v = raw(env, name);
      if (v === undefined) throw new ConfigError(name, `${name} is required`);
      if (!isUuid(v)) throw new ConfigError(name, `${name} must be a UUID, got "${v}"`);
      return v.toLowerCase();
    },
  });
}

/** A tenant worker's settings, set by the orchestrator, not by hand. */
export const WORKER_SETTINGS = {
  tls: internalTlsSetting(WORKER_TLS_NAME),
  tenantId: uuid("TENANT_ID", "the tenant this worker serves"),
  orgId: uuid("ORG_ID", "the tenant's organization"),
  agentsUrl: internalUrlSetting("AGENTS_GRPC_URL", "agents' internal port (`https://` with mutual TLS)"),
  port: port("PORT", { default: 50051, doc: "RuntimeService, for the router only" }),
  host: host("listening address"),
  logLevel: logLevel(),
  otelEndpoint: otelEndpointSetting(
    "OTLP/HTTP base URL traces are exported to (the router passes its own on); unset: no trace export",
  ),
  metricsToken: metricsTokenSetting(
    "bearer token a scraper must present for `GET /metrics` (Prometheus text format) on `PORT`, besides a certificate of the CA (the router passes its own on); unset: not served (404)",
  ),
  exitWithStdin: custom("RUNTIME_EXIT_WITH_STDIN", {
    shown: "unset",
    doc: "`1`: exit when stdin closes (the local orchestrator holds the other end)",
    read: exitsWithStdin,
  }),
};

/** The worker's settings (TENANT_ID and ORG_ID are set by the controller at creation). */
export function workerConfig(env: Env): WorkerConfig {
  return readSettings(WORKER_SETTINGS, env);
}

export function exitsWithStdin(env: Env): boolean {
  return env.RUNTIME_EXIT_WITH_STDIN === "1";
}
