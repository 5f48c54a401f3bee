import { type ComputeConfig, loadConfig } from "../config.ts";

/**
 * Settings for service tests, parsed by the real loader from the
 * environment a deployment would set (recognisable values, so tests can
 * check that defaults come from here).
 */
export function testComputeConfig(env: {
  COMPUTE_DATA_DIR: string;
  COMPUTE_DRIVER: "local" | "kubernetes";
}): ComputeConfig {
  return loadConfig({
    ...env,
    COMPUTE_PORT: "0",
    HOST: "127.0.0.1",
    SANDBOX_IMAGE: "registry.test/sandbox:v1",
    PVC_STORAGE_CLASS: "fast-ssd",
    PVC_WORKSPACE_SIZE: "7Gi",
    COMPUTE_PIDS_MAX: "128",
    COMPUTE_GC_INTERVAL_SECONDS: "3600",
    COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
    LOG_LEVEL: "silent",
  });
}
