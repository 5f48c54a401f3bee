/**
 * What the E2B surface asks of compute: the calls of compute.v1.ComputeService
 * it maps E2B's onto, in the domain's own terms. Served by `grpcCompute` (the
 * service's client); paths are absolute paths in the sandbox, inside its
 * workspace (compute applies its path rules).
 */
export type SandboxStatus = "STARTING" | "READY" | "PAUSED" | "FAILED" | "DESTROYED";

export type ExecEvent =
  | { type: "stdout" | "stderr"; data: Uint8Array }
  | { type: "completed"; exitCode: number; cancelled: boolean };

export interface FileEntry {
  /** Relative to the listed directory, "/"-separated. */
  path: string;
  size: number;
  isDir: boolean;
  mode: number;
  modifiedAt: Date;
}

/** compute's NetworkPolicy: none means no network at all (compute's default). */
export interface NetworkPolicy {
  allowAll: boolean;
  allowedDomains: string[];
  /** "address/prefix", every port. */
  allowedCidrs: string[];
}

export interface ComputePort {
  createSandbox(input: {
    tenantId: string;
    sessionId: string;
    mountPath: string;
    maxRuntimeMs: number;
    networkPolicy?: NetworkPolicy;
  }): Promise<string>;
  /** DESTROYED also for a sandbox compute does not know. */
  status(sandboxId: string): Promise<SandboxStatus>;
  destroySandbox(sandboxId: string): Promise<void>;
  pauseSandbox(sandboxId: string): Promise<void>;
  resumeSandbox(sandboxId: string): Promise<void>;
  exec(input: {
    sandboxId: string;
    command: string;
    args: string[];
    env: Record<string, string>;
    workingDir?: string;
    /** 0: compute's longest. */
    timeoutMs: number;
    signal?: AbortSignal;
    /** Names the exec for sendExecInput / resizeExecTerminal (a UUID); with stdin or terminal. */
    execId?: string;
    /** The command's stdin stays open for sendExecInput (else /dev/null). */
    stdin?: boolean;
    /** Runs it on a pseudo-terminal; its output arrives as stdout. */
    terminal?: { rows: number; cols: number };
  }): AsyncIterable<ExecEvent>;
  /** compute's SendExecInput: at most MAX_INPUT_CHUNK_BYTES of data, then eof closes the input. */
  sendExecInput(sandboxId: string, execId: string, data: Uint8Array, eof: boolean): Promise<void>;
  resizeExecTerminal(sandboxId: string, execId: string, rows: number, cols: number): Promise<void>;
  readFile(
    sandboxId: string,
    path: string,
    offset: number,
    maxBytes: number,
  ): Promise<{ data: Uint8Array; totalSize: number; eof: boolean }>;
  writeFile(sandboxId: string, path: string, data: Uint8Array, append: boolean): Promise<void>;
  listFiles(
    sandboxId: string,
    path: string,
    recursive: boolean,
    maxEntries: number,
  ): Promise<{ entries: FileEntry[]; truncated: boolean }>;
}

/** compute's per-call ceiling on file data (ReadFile and WriteFile) and on entries of one ListFiles. */
export const MAX_FILE_CHUNK_BYTES = 16 * 1024 * 1024;
export const MAX_LIST_ENTRIES = 10_000;
/** compute's ceiling on one SendExecInput's data. */
export const MAX_INPUT_CHUNK_BYTES = 64 * 1024;
