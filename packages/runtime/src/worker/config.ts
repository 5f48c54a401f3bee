import { type Env, logLevel, port, url, uuid } from "../config/env.ts";

export interface WorkerConfig {
  tenantId: string;
  orgId: string;
  /** Base URL of the agents service's gRPC port. */
  agentsUrl: string;
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
  return {
    tenantId: uuid(env, "TENANT_ID"),
    orgId: uuid(env, "ORG_ID"),
    agentsUrl: url(env, "AGENTS_GRPC_URL"),
    port: port(env, "PORT", 50051),
    host: env.HOST?.trim() || "127.0.0.1",
    logLevel: logLevel(env),
    exitWithStdin: exitsWithStdin(env),
  };
}

export function exitsWithStdin(env: Env): boolean {
  return env.RUNTIME_EXIT_WITH_STDIN === "1";
}
