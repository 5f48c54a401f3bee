import { type Env, logLevel, port, uuid } from "../config/env.ts";
import { internalTls, internalUrl, type ServiceTls } from "../config/tls.ts";

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
  /**
   * Exit when stdin closes: the local orchestrator holds the other end, so a
   * worker never outlives its router, even one killed with SIGKILL.
   */
  exitWithStdin: boolean;
}

/** The worker's settings (TENANT_ID and ORG_ID are set by the controller at creation). */
export function workerConfig(env: Env): WorkerConfig {
  const tls = internalTls(env, WORKER_TLS_NAME);
  return {
    tenantId: uuid(env, "TENANT_ID"),
    orgId: uuid(env, "ORG_ID"),
    agentsUrl: internalUrl(env, "AGENTS_GRPC_URL", tls),
    tls,
    port: port(env, "PORT", 50051),
    host: env.HOST?.trim() || "127.0.0.1",
    logLevel: logLevel(env),
    exitWithStdin: exitsWithStdin(env),
  };
}

export function exitsWithStdin(env: Env): boolean {
  return env.RUNTIME_EXIT_WITH_STDIN === "1";
}
