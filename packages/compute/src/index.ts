export { type NetworkPolicy, POLICY_LIMITS, validateNetworkPolicy } from "@platform/network-policy";
export { type ComputeApp, createComputeApp, createDriver, runMigrations } from "./app.ts";
export { COMPUTE_SETTINGS, type ComputeConfig, ConfigError, loadConfig } from "./config.ts";
export {
  DELETE_AFTER_KEY,
  type ExecEvent,
  type ExecRequest,
  type FailureReason,
  type FileEntryInfo,
  KILL_GRACE_MS,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxPhase,
  type SandboxSpec,
  SOFT_DELETE_GRACE_MS,
  type Usage,
  zeroUsage,
} from "./driver.ts";
export { collectExpiredWorkspaces, listExpiredWorkspaces } from "./drivers/local/gc.ts";
export { LocalDriver, type LocalDriverOptions, sandboxUid } from "./drivers/local/local-driver.ts";
export { releaseOrphanedMounts } from "./drivers/local/workspace-image.ts";
export { listenInNetns } from "./egress/netns-listener.ts";
export { type DenyReason, EgressProxy, type EgressProxyOptions } from "./egress/proxy.ts";
export { proxyEnv, SANDBOX_PROXY_PORT } from "./egress/proxy-env.ts";
export { createResolver, type EgressResolver, parseHostsSetting } from "./egress/resolver.ts";
export { cleanMountPath, cleanWorkspacePath } from "./paths.ts";
export { computeServiceImpl, statusOf, usageOf } from "./server.ts";
export {
  ComputeDomain,
  type ComputeDomainOptions,
  type CreateSandboxInput,
  type ExecInput,
  execTimeoutMs,
  type SandboxDefaults,
  type SandboxView,
  specOf,
} from "./service/compute-domain.ts";
export { LIMITS } from "./service/limits.ts";
export { KyselyNetworkEventStore } from "./store/kysely-network-event-store.ts";
export { type ComputeDB, KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
export { MIGRATIONS_TABLE, migrations } from "./store/migrations.ts";
export {
  MemoryNetworkEventStore,
  type NetworkEventRecord,
  type NetworkEventStore,
} from "./store/network-event-store.ts";
export { MemorySandboxStore, type SandboxRecord, type SandboxState, type SandboxStore } from "./store/sandbox-store.ts";
