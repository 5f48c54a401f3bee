import { resolve } from "node:path";
import { LIMITS } from "./service/limits.ts";
import { workspaceSizeBytes } from "./service/workspace-size.ts";

export interface ComputeConfig {
  port: number;
  host: string;
  databaseUrl?: string;
  dataDir: string;
  driver: "local" | "kubernetes";
  sandboxImage: string;
  pvcStorageClass: string;
  pvcWorkspaceSize: string;
  pidsMax: number;
  gcIntervalMs: number;
  /**
   * Local driver: sandboxes keep running when the service stops and are
   * re-attached on the next start (the default), or end with it (the
   * one-command launcher, whose Ctrl-C must leave no process behind).
   */
  keepSandboxesOnExit: boolean;
  /**
   * COMPUTE_IDLE_PAUSE_SECONDS: a sandbox with no running exec for this long
   * is paused (CreateSandbox's idle_timeout overrides it per sandbox); 0 =
   * never (`off` or 0).
   */
  idlePauseMs: number;
  logLevel: string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Reads and validates the compute service's environment once, at start-up. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ComputeConfig {
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
    return n;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    if (raw === "true" || raw === "1") return true;
    if (raw === "false" || raw === "0") return false;
    throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
  };
  if (env.COMPUTE_HOST) throw new ConfigError("COMPUTE_HOST was replaced by HOST (every service reads HOST)");
  const driver = env.COMPUTE_DRIVER || "local";
  if (driver !== "local" && driver !== "kubernetes")
    throw new ConfigError(`COMPUTE_DRIVER must be local or kubernetes, got ${JSON.stringify(driver)}`);
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl))
    throw new ConfigError("DATABASE_URL must be a postgres:// URL");
  const size = env.PVC_WORKSPACE_SIZE || LIMITS.defaultWorkspaceSize;
  try {
    workspaceSizeBytes(size, "PVC_WORKSPACE_SIZE");
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return {
    port: int("COMPUTE_PORT", 50051, 0, 65535),
    host: env.HOST || "127.0.0.1",
    databaseUrl,
    dataDir: resolve(env.COMPUTE_DATA_DIR || ".data/compute"),
    driver,
    sandboxImage: env.SANDBOX_IMAGE || "debian:bookworm-slim",
    pvcStorageClass: env.PVC_STORAGE_CLASS || "",
    pvcWorkspaceSize: size,
    pidsMax: int("COMPUTE_PIDS_MAX", 512, 16, 1_000_000),
    gcIntervalMs: int("COMPUTE_GC_INTERVAL_SECONDS", 3600, 1, 7 * 86400) * 1000,
    keepSandboxesOnExit: bool("COMPUTE_KEEP_SANDBOXES_ON_EXIT", true),
    idlePauseMs:
      env.COMPUTE_IDLE_PAUSE_SECONDS === "off"
        ? 0
        : int("COMPUTE_IDLE_PAUSE_SECONDS", LIMITS.defaultIdlePauseMs / 1000, 0, LIMITS.maxIdleTimeoutMs / 1000) * 1000,
    logLevel: env.LOG_LEVEL || "info",
  };
}
