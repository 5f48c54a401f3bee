/**
 * The sandbox driver: the one seam between the compute domain (validation,
 * defaults, the state table, persistence, exec deadlines) and a place that
 * runs sandboxes (local bubblewrap + cgroups, Kubernetes pods + PVCs).
 *
 * Every driver passes `driverContract` from `@platform/compute/testing`,
 * which checks only behaviour a caller can observe through this interface.
 *
 * What the domain does before calling a driver:
 * - ids are valid UUIDs, the spec has every default resolved;
 * - workspace paths are already lexically cleaned, relative to mount_path,
 *   contain no `..` and no leading `/` ("" or "." = the workspace root).
 *   The driver still owns symlink resolution (rule 2: follow a symlink only
 *   when it stays inside mount_path, else PermissionDenied), because only it
 *   can do that race-free against the real filesystem;
 * - exec waits for READY and the timeout cap are the domain's; the driver
 *   only sees an AbortSignal.
 *
 * Errors: drivers throw PlatformError from @platform/errors (NotFound for an
 * unknown sandbox or missing file, PermissionDenied for a symlink leaving the
 * mount, InvalidArgument for e.g. reading a directory, FailedPrecondition for
 * a sandbox that is not running). Anything else becomes INTERNAL.
 */

import type { NetworkPolicy } from "@platform/network-policy";

/** Everything needed to run one sandbox, all defaults resolved. */
export interface SandboxSpec {
  sandboxId: string;
  tenantId: string;
  sessionId: string;
  image: string;
  workspace: {
    /** Kubernetes storage class; the local driver ignores it. */
    storageClass: string;
    /** Capacity string such as "5Gi"; the local driver ignores it. */
    size: string;
    /** Absolute, cleaned, e.g. "/workspace". */
    mountPath: string;
  };
  limits: {
    cpuMillis: number;
    memoryBytes: number;
    /**
     * Hard limit on running time: the sandbox fails (deadline) at
     * createdAt + maxRuntimeMs + the time it spent paused.
     */
    maxRuntimeMs: number;
  };
  /** When the record was created; deadlines count from here (also after a restart). */
  createdAt: Date;
  /** Time spent paused in pauses that ended (the record's; 0 for a new sandbox). */
  pausedMs?: number;
  /** recover only: the record says the sandbox is paused since then. */
  pausedAt?: Date;
  /** Outbound network, validated; absent: none at all (default deny, no way out). */
  networkPolicy?: NetworkPolicy;
}

/**
 * "paused": stopped by `pause` (processes frozen or ended, memory given
 * back), workspace kept; `resume` makes it ready again.
 */
export type SandboxPhase = "starting" | "ready" | "paused" | "failed" | "gone";

/** Why a sandbox failed. */
export type FailureReason =
  /** The sandbox's main process exited (non-zero, or at all: a sandbox is not supposed to end). */
  | "exited"
  /** Killed because it ran past limits.maxRuntimeMs. */
  | "deadline"
  /** The main process was killed for memory (cgroup OOM / OOMKilled). */
  | "oom"
  /** Could not be provisioned. */
  | "start_error"
  /** Its process or pod vanished (e.g. found missing after a restart of the compute service). */
  | "lost";

export interface SandboxObservation {
  phase: SandboxPhase;
  reason?: FailureReason;
  /** Exit code of the main process when it exited. */
  exitCode?: number;
  /** Human text for logs; never shown as-is to callers. */
  message?: string;
}

/** All counters are plain numbers (bytes / milliseconds); 0 when not measurable. */
export interface Usage {
  cpuMs: number;
  memoryPeakBytes: number;
  memoryAvgBytes: number;
  diskReadBytes: number;
  diskWriteBytes: number;
  networkEgressBytes: number;
  networkIngressBytes: number;
}

export const zeroUsage = (): Usage => ({
  cpuMs: 0,
  memoryPeakBytes: 0,
  memoryAvgBytes: 0,
  diskReadBytes: 0,
  diskWriteBytes: 0,
  networkEgressBytes: 0,
  networkIngressBytes: 0,
});

export interface ExecRequest {
  command: string;
  args: string[];
  /** Added on top of the sandbox's base environment. */
  env: Record<string, string>;
  /** Absolute path inside the sandbox; the domain defaults it to mountPath. */
  workingDir: string;
  /**
   * Aborting cancels the exec: SIGTERM to the whole process tree of this exec,
   * SIGKILL after the driver's grace (10 s in production), then one final
   * `completed` event with cancelled = true and exitCode = -1.
   */
  signal?: AbortSignal;
  /**
   * Input for the command (issue 27): its stdin, or its terminal with
   * `terminal`. Absent: stdin is /dev/null. Only for a driver with
   * `execInput` (the domain checks).
   */
  input?: ExecStdin;
  /** Runs the command on a pseudo-terminal of this size (stdin, stdout, stderr); its output comes as `stdout`. */
  terminal?: TerminalSize;
}

export interface TerminalSize {
  rows: number;
  cols: number;
}

/**
 * The input of one exec, filled by SendExecInput (the domain bounds it) and
 * drained by the driver as fast as the command takes it.
 */
export interface ExecStdin {
  /** The next chunk once there is one; null once the input is closed (eof). */
  read(): Promise<Uint8Array | null>;
  /** The driver's side: the command can take no more (it exited or closed its stdin); later input is refused. */
  end(): void;
  /**
   * ResizeExecTerminal's sizes, for a terminal exec; returns an unsubscribe
   * function. The call answers once the listener's promise settles: the
   * driver resolves it when the terminal has the size, so input sent after
   * the answer meets the new size.
   */
  onResize(listener: (size: TerminalSize) => unknown): () => void;
}

export type ExecEvent =
  | { type: "stdout"; data: Uint8Array }
  | { type: "stderr"; data: Uint8Array }
  | {
      type: "completed";
      /** Process exit code; 128 + signal number when killed by a signal; -1 when cancelled. */
      exitCode: number;
      wallTimeMs: number;
      cancelled: boolean;
      /** This exec only. */
      usage: Usage;
      /** Set when the process was killed because the sandbox ran out of memory. */
      oomKilled?: boolean;
    };

export interface ReadResult {
  data: Uint8Array;
  totalSize: number;
  eof: boolean;
}

export interface FileEntryInfo {
  /** Relative to the listed directory, "/"-separated. */
  path: string;
  size: number;
  isDir: boolean;
  /** Permission bits only (mode & 0o7777). */
  mode: number;
  modifiedAt: Date;
}

export interface ListResult {
  entries: FileEntryInfo[];
  truncated: boolean;
}

export interface SandboxDriver {
  readonly name: string;

  /**
   * Starts provisioning and returns without waiting for readiness. Throws
   * (INTERNAL) only when provisioning cannot even begin.
   */
  create(spec: SandboxSpec): Promise<void>;

  /**
   * Re-attaches to a sandbox created by an earlier process of the compute
   * service (records outlive restarts). Returns its current observation:
   * a driver that finds it still running keeps enforcing its limits; one
   * that cannot find it reports failed/lost.
   */
  recover(spec: SandboxSpec): Promise<SandboxObservation>;

  /** Current phase. NotFound for an id the driver never saw. */
  observe(sandboxId: string): Promise<SandboxObservation>;

  /**
   * Resolves with the first observation whose phase is not "starting"
   * (at once if already so); rejects with the signal's reason when aborted.
   */
  waitSettled(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation>;

  /** Calls `listener` on every phase change; returns an unsubscribe function. */
  onPhaseChange(listener: (sandboxId: string, observation: SandboxObservation) => void): () => void;

  /**
   * Runs one command in a READY sandbox. The iterable yields stdout/stderr
   * chunks as they arrive and always ends with exactly one `completed`.
   * A sandbox that is not READY (starting, paused, failed, gone) is refused
   * with FailedPrecondition `sandbox_not_runnable`, one unknown here with
   * NotFound `sandbox_not_found`, before anything runs: the domain asks a
   * known sandbox's exec first and resumes or waits for it only then.
   */
  exec(sandboxId: string, request: ExecRequest): AsyncIterable<ExecEvent>;

  /**
   * Whether `exec` takes `input` and `terminal` (issue 27). Absent or false:
   * the domain refuses them with FAILED_PRECONDITION.
   */
  readonly execInput?: boolean;

  /** offset ≥ 0; maxBytes > 0 already capped by the domain. */
  readFile(sandboxId: string, path: string, offset: number, maxBytes: number): Promise<ReadResult>;

  /** Creates missing parent directories; mode applies only when the file is created. */
  writeFile(sandboxId: string, path: string, data: Uint8Array, append: boolean, mode: number): Promise<number>;

  /** maxEntries already defaulted and capped by the domain. */
  listFiles(sandboxId: string, path: string, recursive: boolean, maxEntries: number): Promise<ListResult>;

  /** Cumulative usage since creation (also after the sandbox stopped, until destroyed). */
  usage(sandboxId: string): Promise<Usage>;

  /**
   * Stops a READY sandbox's processes and gives its memory back; its
   * workspace (files) stays, `observe` says "paused", `usage` stays readable,
   * and its max runtime stops counting. No exec may be running (the domain
   * checks; a driver may end one). At once when already paused;
   * FailedPrecondition when it is starting, failed or gone.
   */
  pause(sandboxId: string): Promise<void>;

  /**
   * Makes a paused sandbox ready again with the same workspace; resolves
   * with the observation once it is settled (ready, or failed if it could not
   * come back). At once when ready; FailedPrecondition when failed or gone
   * (also when a destroy won a race with it). Rejects with the signal's
   * reason when aborted.
   */
  resume(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation>;

  /**
   * Kills everything in the sandbox, releases its resources and soft-deletes
   * the workspace (marker `compute.platform.io/delete-after` = now + grace)
   * unless another sandbox of the session uses it. The workspace belongs to
   * the session (tenantId + sessionId): `create` for a session that had a
   * sandbox mounts the same one (files, modes, times) and clears the marker.
   * Returns the lifetime usage. Idempotent: a second call returns the same.
   */
  destroy(sandboxId: string): Promise<Usage>;

  /**
   * Physically removes soft-deleted workspaces whose delete-after has passed,
   * never one a sandbox of its session uses. Returns what went: sandbox ids,
   * and `session:<name>` for a session's workspace.
   */
  collectGarbage(now?: Date): Promise<string[]>;

  /**
   * Called once the domain has recovered every sandbox its store holds as
   * live: whatever else the driver finds of earlier runs (a sandbox whose
   * record ended unseen, a workspace no live sandbox uses) gets a
   * delete-after. Returns what was marked. Optional: a driver whose objects
   * carry their own lifecycle (Kubernetes) has nothing to reconcile.
   */
  reconcile?(): Promise<string[]>;

  /**
   * Replaces a sandbox's network policy (undefined: none); new connections
   * follow it at once. Optional: a driver without it refuses network
   * policies (the domain answers FAILED_PRECONDITION).
   */
  setNetworkPolicy?(sandboxId: string, policy: NetworkPolicy | undefined): Promise<void>;

  /**
   * The driver's own image store (the local driver): what `image` may name,
   * checked before a sandbox is recorded, and the store's operations.
   * Absent: the driver takes any image name (a registry's).
   */
  images?: DriverImages;

  /** Stops watching (timers, watchers). Running sandboxes are left alone. */
  close(): Promise<void>;
}

/** A stored image (issue 22): name:tag, content digest, size, when, whence. */
export interface ImageInfo {
  name: string;
  digest: string;
  sizeBytes: number;
  /** ISO 8601 */
  createdAt: string;
  source: string;
}

/** A driver's image store (SandboxDriver.images). */
export interface DriverImages {
  /** INVALID_ARGUMENT (reason image_not_found, listing the images) when a sandbox cannot run on `image`. */
  check(image: string): void;
  list(): { images: ImageInfo[]; defaultImage: string; defaultIsHost: boolean };
  import(path: string, name: string): Promise<ImageInfo>;
  remove(name: string): Promise<ImageInfo>;
  build(request: { name: string; packages: string[]; suite?: string }): Promise<ImageInfo>;
}

/** The soft-delete marker key (annotation on a PVC, a marker file locally). */
export const DELETE_AFTER_KEY = "compute.platform.io/delete-after";
/** Soft-delete grace of the spec. */
export const SOFT_DELETE_GRACE_MS = 24 * 60 * 60 * 1000;
/** Stop grace after cancel of the spec. */
export const KILL_GRACE_MS = 10_000;
