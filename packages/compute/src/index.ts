export {
  DELETE_AFTER_KEY,
  KILL_GRACE_MS,
  SOFT_DELETE_GRACE_MS,
  zeroUsage,
  type ExecEvent,
  type ExecRequest,
  type FailureReason,
  type FileEntryInfo,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxPhase,
  type SandboxSpec,
  type Usage,
} from "./driver.ts";
export { cleanMountPath, cleanWorkspacePath } from "./paths.ts";
export { LIMITS } from "./service/limits.ts";
export {
  ComputeDomain,
  execTimeoutMs,
  specOf,
  type ComputeDomainOptions,
  type CreateSandboxInput,
  type ExecInput,
  type SandboxDefaults,
  type SandboxView,
} from "./service/compute-domain.ts";
export { MemorySandboxStore, type SandboxRecord, type SandboxState, type SandboxStore } from "./store/sandbox-store.ts";
export { KyselySandboxStore, type ComputeDB } from "./store/kysely-sandbox-store.ts";
export { MIGRATIONS_TABLE, migrations } from "./store/migrations.ts";
export { LocalDriver, sandboxUid, type LocalDriverOptions } from "./drivers/local/local-driver.ts";
export { collectExpiredWorkspaces, listExpiredWorkspaces } from "./drivers/local/gc.ts";
export { computeServiceImpl, statusOf, usageOf } from "./server.ts";
export { loadConfig, ConfigError, type ComputeConfig } from "./config.ts";
export { createComputeApp, createDriver, runMigrations, type ComputeApp } from "./app.ts";
