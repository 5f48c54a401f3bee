/** The spec's limits and defaults (section 8), in one place. */
export const LIMITS = {
  defaultCpuMillis: 1000,
  defaultMemoryBytes: 1024 * 1024 * 1024,
  defaultMaxRuntimeMs: 15 * 60_000,
  defaultMountPath: "/workspace",
  maxExecTimeoutMs: 600_000,
  maxFileChunkBytes: 16 * 1024 * 1024,
  defaultListEntries: 1000,
  maxListEntries: 10_000,
  // Bounds of our own, so a typo cannot ask for a machine we do not have.
  minCpuMillis: 10,
  maxCpuMillis: 64_000,
  minMemoryBytes: 16 * 1024 * 1024,
  maxMemoryBytes: 256 * 1024 * 1024 * 1024,
  maxMaxRuntimeMs: 7 * 24 * 3_600_000,
  /** COMPUTE_IDLE_PAUSE_SECONDS when unset (issue 18: 5 minutes). */
  defaultIdlePauseMs: 5 * 60_000,
  /** CreateSandbox's idle_timeout and the setting: at most as long as a sandbox may run. */
  maxIdleTimeoutMs: 7 * 24 * 3_600_000,
  /** PVC_WORKSPACE_SIZE when unset. */
  defaultWorkspaceSize: "5Gi",
  // Workspace capacity bounds (both drivers): below 32 MiB an ext4 image is mostly
  // metadata; 1 TiB is far beyond what one agent session needs.
  minWorkspaceBytes: 32 * 1024 * 1024,
  maxWorkspaceBytes: 1024 ** 4,
} as const;
