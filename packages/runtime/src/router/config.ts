import { ConfigError, type Env, logLevel, port, required } from "../config/env.ts";
import { internalTls, internalUrl, type ServiceTls } from "../config/tls.ts";
import { CORS_SETTING, loadServiceTls, parseAllowedOrigins, TlsSettingsError } from "@platform/rpc";

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
  maxWaitersPerTenant: number;
  /** Cold-start wait for a woken worker (spec: 10 s). */
  coldStartWaitMs: number;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the router (default none). */
  corsAllowedOrigins: string[];
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

/** The router's settings, parsed once at start-up; a bad one throws ConfigError naming it. */
export function routerConfig(env: Env): RouterConfig {
  const tls = internalTls(env, ROUTER_TLS_NAME);
  const common = {
    port: port(env, "ROUTER_PORT", 8080),
    host: env.HOST?.trim() || "127.0.0.1",
    identityUrl: internalUrl(env, "IDENTITY_GRPC_URL", tls),
    tls,
    logLevel: logLevel(env),
    maxWaitersPerTenant: positiveInt(env, "RUNTIME_MAX_WAITERS_PER_TENANT", 32),
    // The spec's 10 s; slow machines (a loaded CI box starting node + tsx) may raise it.
    coldStartWaitMs: positiveInt(env, "RUNTIME_COLD_START_WAIT_MS", 10_000),
    corsAllowedOrigins: corsOrigins(env),
  };
  const kind = env.RUNTIME_ORCHESTRATOR?.trim() || "local";
  if (kind === "local") {
    return {
      ...common,
      orchestrator: "local",
      dataDir: env.RUNTIME_DATA_DIR?.trim() || ".data/runtime",
      agentsUrl: internalUrl(env, "AGENTS_GRPC_URL", tls),
      workerHost: env.RUNTIME_WORKER_HOST?.trim() || "127.0.0.1",
      spareWorker: onOff(env, "RUNTIME_SPARE_WORKER", true),
      workerTlsFiles: tls && workerTlsFiles(env),
    };
  }
  if (kind === "kubernetes") {
    return {
      ...common,
      orchestrator: "kubernetes",
      namespace: required(env, "RUNTIME_NAMESPACE"),
      workerTemplatePath: required(env, "RUNTIME_WORKER_TEMPLATE"),
    };
  }
  throw new ConfigError(`RUNTIME_ORCHESTRATOR must be "local" or "kubernetes", got "${kind}"`);
}

function onOff(env: Env, key: string, fallback: boolean): boolean {
  const raw = env[key]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (raw === "1" || raw === "true" || raw === "on") return true;
  if (raw === "0" || raw === "false" || raw === "off") return false;
  throw new ConfigError(`${key} must be 1 or 0 (true/false, on/off), got "${env[key]}"`);
}

function positiveInt(env: Env, key: string, fallback: number): number {
  const raw = env[key]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`${key} must be a positive integer, got "${raw}"`);
  return n;
}

const WORKER_CERT = "RUNTIME_WORKER_TLS_CERT_FILE";
const WORKER_KEY = "RUNTIME_WORKER_TLS_KEY_FILE";

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
    throw new ConfigError(message);
  }
  return { caFile, certFile, keyFile };
}

function corsOrigins(env: Env): string[] {
  try {
    return parseAllowedOrigins(env[CORS_SETTING]);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}
