import type { NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import type { Agent, AuthContext, MessageInput, SendMode, Session, SessionEvent, Waiting } from "./model.ts";

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
  /** What compute measured of this exec (ExecCompleted.usage.cpu_ms, wall_time); absent when it said nothing. */
  usage?: { cpuMs: number; wallMs: number };
};

export type ExecOptions = {
  timeoutMs: number;
  /** Bytes of each stream kept in the result. */
  maxOutputBytes: number;
  signal: AbortSignal;
  /** Every chunk of output as compute streams it (whatever maxOutputBytes keeps). */
  onOutput?: (stream: "stdout" | "stderr", data: Uint8Array) => void;
};

export type FileEntry = { path: string; size: number; isDir: boolean };

/**
 * The workspace one owner (a run, a file call) works in: the session's
 * sandbox, without naming it. The tools see only this; which sandbox serves
 * (created, reused, resumed, replaced) is SessionSandbox's business.
 */
export interface Workspace {
  exec(command: string, args: string[], options: ExecOptions): Promise<ExecResult>;
  readFile(
    path: string,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<{ data: Uint8Array; totalSize: number; eof: boolean }>;
  writeFile(path: string, data: Uint8Array, signal: AbortSignal): Promise<number>;
  listFiles(
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }>;
}

/**
 * What compute says of a session's sandbox: `running` (STARTING or READY,
 * or compute could not be asked: the call itself then says why), `paused`
 * (PAUSED: its processes stopped, its workspace kept), or `gone` (FAILED,
 * DESTROYED, or unknown to compute: lost with a restart, past its max
 * runtime), when the session needs a new one.
 */
export type SandboxState = { kind: "running" } | { kind: "paused" } | { kind: "gone"; why: SandboxGoneReason };
export type SandboxGoneReason = "failed" | "destroyed" | "not_found";

/** The session's sandbox in compute. Adapter: compute.v1.ComputeService over gRPC. */
/** A connection the sandbox's egress proxy refused (compute.v1.NetworkEvent). */
export type NetworkDenial = { host: string; port: number; reason: string; at: Date };

export interface Sandboxes {
  /**
   * Creates the sandbox of one session of a tenant (= org); returns its id.
   * `networkPolicy`: what it may reach (compute's egress proxy); absent: nothing.
   */
  create(
    tenantId: string,
    sessionId: string,
    options?: { networkPolicy?: NetworkPolicy; image?: string },
  ): Promise<string>;
  /**
   * The images a sandbox may run on (ListImages: the stored ones and `host`);
   * anyImage: compute takes any name. Optional: without it images are not checked.
   */
  images?(): Promise<{ names: string[]; anyImage: boolean }>;
  /**
   * The sandbox's refused connections recorded after `after` (a position an
   * earlier answer gave; "" from the first), and the position after them
   * (ListNetworkEvents). Optional: without it no `network_denied` event is written.
   */
  networkDenials?(sandboxId: string, after: string): Promise<{ denials: NetworkDenial[]; next: string }>;
  /** Compute's view of a sandbox (DescribeSandbox). */
  state(sandboxId: string): Promise<SandboxState>;
  /**
   * Makes a PAUSED sandbox READY again (ResumeSandbox). False when the
   * sandbox is gone meanwhile (FAILED, DESTROYED, unknown).
   */
  resume(sandboxId: string): Promise<boolean>;
  /**
   * Destroys a sandbox (compute soft-deletes its workspace for the grace
   * window). An unknown or already destroyed sandbox is not an error.
   */
  destroy(sandboxId: string): Promise<void>;
  exec(sandboxId: string, command: string, args: string[], options: ExecOptions): Promise<ExecResult>;
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

/** A run just started: its id, the session it holds, the seq of the last client message it logged. */
export type StartedRun = { runId: string; session: Session; lastMessageSeq: number };

/**
 * What a send became: a run it started (the session was free), or a queued
 * send (`message_queued` event) that a run takes once the runs before it
 * ended.
 */
export type SendOutcome = { started: StartedRun } | { queued: SessionEvent };

/** The tool loop's runs, one per session at a time. Adapter: runs/runner.ts. */
export interface Runs {
  /** How long a run whose process died can hold its session. */
  readonly leaseMs: number;
  /**
   * A send by its mode: `reject` is start(); `enqueue` starts a run when the
   * session is free and nothing is queued, else queues the messages;
   * `interrupt` queues them ahead of the others and stops the active run
   * (here, or through the database on another replica).
   */
  send(
    auth: AuthContext,
    agent: Agent,
    sessionId: string,
    messages: readonly MessageInput[],
    mode: SendMode,
    logger?: Logger,
  ): Promise<SendOutcome>;
  /**
   * Logs the messages and starts a run: `aborted` while another run holds
   * the session, `unavailable` when the model cannot be reached.
   */
  start(
    auth: AuthContext,
    agent: Agent,
    sessionId: string,
    messages: readonly MessageInput[],
    logger?: Logger,
  ): Promise<StartedRun>;
  /**
   * Resumes the session's paused run once every call of `waiting` has its
   * answer; undefined when the session no longer waits on it (another
   * request resumed it first, or it was cancelled).
   */
  resume(
    auth: AuthContext,
    agent: Agent,
    sessionId: string,
    waiting: Waiting,
    logger?: Logger,
  ): Promise<StartedRun | undefined>;
  /**
   * Cancels the session's active run wherever it runs, or its paused run
   * (its calls get error results); false when neither was there.
   */
  cancel(orgId: string, sessionId: string): Promise<boolean>;
}

/**
 * A session's log as a stream: the stored events after `after`, then live
 * ones until the terminal event of `runId` (or of the active run; with
 * none, it replays and ends). With `queuedSeq` (a queued send's
 * `message_queued` seq): that event, then only the events of the run that
 * takes the send, to its terminal event. Adapter: runs/follow.ts.
 */
export interface EventFeed {
  follow(
    orgId: string,
    sessionId: string,
    after: number,
    options: { signal?: AbortSignal; runId?: string; queuedSeq?: number },
  ): AsyncIterable<SessionEvent>;
}
