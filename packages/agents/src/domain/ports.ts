import type { AuthContext } from "./model.ts";

/** Resolves a bearer credential (JWT or API key). Adapter: identity's gRPC VerifyToken. */
export interface Authenticator {
  /**
   * Throws PlatformError `unauthenticated` for a missing, invalid or expired
   * credential and `unavailable` when identity cannot be asked.
   */
  verify(token: string): Promise<AuthContext>;
  /** Whether identity answers at all (readiness). */
  reachable(): Promise<boolean>;
}

export type ExecResult = {
  exitCode: number;
  /** Head of stdout, at most the requested bytes. */
  stdout: string;
  stderr: string;
  /** Bytes produced, including the part not kept. */
  stdoutBytes: number;
  stderrBytes: number;
  cancelled: boolean;
};

export type FileEntry = { path: string; size: number; isDir: boolean };

/** The session's sandbox in compute. Adapter: compute.v1.ComputeService over gRPC. */
export interface Sandboxes {
  /** Creates the sandbox of one session of a tenant (= org); returns its id. */
  create(tenantId: string, sessionId: string): Promise<string>;
  /**
   * Whether a session's existing sandbox can still run commands. False when
   * it is FAILED, DESTROYED or unknown (its process ended with a restart of
   * the platform, it hit its max runtime): the session then gets a new one.
   */
  usable(sandboxId: string): Promise<boolean>;
  /**
   * Destroys a sandbox (compute soft-deletes its workspace for the grace
   * window). An unknown or already destroyed sandbox is not an error.
   */
  destroy(sandboxId: string): Promise<void>;
  exec(
    sandboxId: string,
    command: string,
    args: string[],
    options: {
      timeoutMs: number;
      maxOutputBytes: number;
      signal: AbortSignal;
      /** Every chunk of output as compute streams it (whatever maxOutputBytes keeps). */
      onOutput?: (stream: "stdout" | "stderr", data: Uint8Array) => void;
    },
  ): Promise<ExecResult>;
  readFile(
    sandboxId: string,
    path: string,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<{ data: Uint8Array; totalSize: number; eof: boolean }>;
  writeFile(sandboxId: string, path: string, data: Uint8Array, signal: AbortSignal): Promise<number>;
  listFiles(
    sandboxId: string,
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }>;
}

/** The models this service can run. Adapter: the model provider registry. */
export interface Models {
  /** Throws PlatformError invalid_argument when no configured provider serves `model`, naming the setting that would enable it. */
  check(model: string): void;
}

/** One entry of a workspace directory listing. */
export type WorkspaceEntry = { path: string; size: number; isDir: boolean; mode: number; modifiedAt?: Date };

/**
 * A sandbox's workspace files with every field compute has (offsets,
 * append, modes, times), for users' uploads and downloads. Adapter:
 * compute.v1.ComputeService ReadFile, WriteFile and ListFiles. Compute's
 * answers about the call (invalid path, missing file, symlink out, disk
 * full) come back as its PlatformError, reason included; a sandbox that
 * cannot serve the call (unknown, FAILED, DESTROYED) as reason
 * sandbox_not_found or sandbox_not_runnable; anything else as unavailable.
 */
export interface WorkspaceFiles {
  list(
    sandboxId: string,
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }>;
  read(
    sandboxId: string,
    path: string,
    options: { offset: number; maxBytes: number; signal: AbortSignal },
  ): Promise<{ data: Uint8Array; totalSize: number; eof: boolean }>;
  write(
    sandboxId: string,
    path: string,
    data: Uint8Array,
    options: { append: boolean; mode: number; signal: AbortSignal },
  ): Promise<number>;
}
