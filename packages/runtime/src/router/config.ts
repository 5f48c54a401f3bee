import { ConfigError, type Env, logLevel, port, required, url } from "../config/env.ts";

export type RouterConfig = {
  port: number;
  host: string;
  identityUrl: string;
  logLevel: string;
  maxWaitersPerTenant: number;
  /** Cold-start wait for a woken worker (spec: 10 s). */
  coldStartWaitMs: number;
} & (
  | {
      orchestrator: "local";
      dataDir: string;
      /** Passed to every worker as AGENTS_GRPC_URL. */
      agentsUrl: string;
      workerHost: string;
      /** Keep a pre-started spare worker for cold starts (RUNTIME_SPARE_WORKER, default on). */
      spareWorker: boolean;
    }
  | {
      orchestrator: "kubernetes";
      namespace: string;
      workerTemplatePath: string;
    }
);

/** The router's settings, parsed once at start-up; a bad one throws ConfigError naming it. */
export function routerConfig(env: Env): RouterConfig {
  const common = {
    port: port(env, "ROUTER_PORT", 8080),
    host: env.HOST?.trim() || "127.0.0.1",
    identityUrl: url(env, "IDENTITY_GRPC_URL"),
    logLevel: logLevel(env),
    maxWaitersPerTenant: positiveInt(env, "RUNTIME_MAX_WAITERS_PER_TENANT", 32),
    // The spec's 10 s; slow machines (a loaded CI box starting node + tsx) may raise it.
    coldStartWaitMs: positiveInt(env, "RUNTIME_COLD_START_WAIT_MS", 10_000),
  };
  const kind = env.RUNTIME_ORCHESTRATOR?.trim() || "local";
  if (kind === "local") {
    return {
      ...common,
      orchestrator: "local",
      dataDir: env.RUNTIME_DATA_DIR?.trim() || ".data/runtime",
      agentsUrl: url(env, "AGENTS_GRPC_URL"),
      workerHost: env.RUNTIME_WORKER_HOST?.trim() || "127.0.0.1",
      spareWorker: onOff(env, "RUNTIME_SPARE_WORKER", true),
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
