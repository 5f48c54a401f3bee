import { randomUUID } from "node:crypto";
import { Code, ComputeReason, PlatformError, requireUuid } from "@platform/errors";
import { type NetworkPolicy, validateNetworkPolicy } from "@platform/network-policy";
import { inWorkSpan, startWorkSpan, type WorkSpan } from "@platform/rpc";
import type { Logger } from "pino";
import {
  type ExecEvent,
  type ExecRequest,
  type FailureReason,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  type Usage,
  zeroUsage,
} from "../driver.ts";
import { KeyedLock } from "../keyed-lock.ts";
import { checkPathLimits, inSandboxView } from "../path-limits.ts";
import { cleanMountPath, cleanWorkspacePath } from "../paths.ts";
import {
  MemoryNetworkEventStore,
  type NetworkEventRecord,
  type NetworkEventStore,
} from "../store/network-event-store.ts";
import type { SandboxRecord, SandboxState, SandboxStore } from "../store/sandbox-store.ts";
import { checkCommandLine } from "./exec-args.ts";
import { type ExecInputChannel, ExecInputs, MAX_INPUT_CHUNK_BYTES, terminalSize } from "./exec-input.ts";
import { ImageOps } from "./image-ops.ts";
import { LIMITS } from "./limits.ts";
import { checkSandboxStrings } from "./sandbox-strings.ts";
import { workspaceSizeBytes } from "./workspace-size.ts";

export interface SandboxDefaults {
  /** SANDBOX_IMAGE */
  image: string;
  /** PVC_STORAGE_CLASS */
  storageClass: string;
  /** PVC_WORKSPACE_SIZE */
  workspaceSize: string;
}

export interface ComputeDomainOptions {
  driver: SandboxDriver;
  store: SandboxStore;
  defaults: SandboxDefaults;
  /** How long ExecCommand (and file calls) wait for a STARTING sandbox. */
  readyTimeoutMs?: number;
  /**
   * COMPUTE_IDLE_PAUSE_SECONDS: a sandbox with no running exec (and no file
   * call) for this long is paused, unless CreateSandbox set its own period.
   * 0 = never. Default 5 minutes.
   */
  idlePauseMs?: number;
  /** The egress proxy's record of connection attempts (ListNetworkEvents); default in memory. */
  networkEvents?: NetworkEventStore;
  logger?: Logger;
}

/** A network policy as a caller sends it (compute.v1.NetworkPolicy), before validation. */
export interface NetworkPolicyInput {
  allowAll?: boolean;
  allowedDomains?: string[];
  allowedCidrs?: { cidr: string; ports?: number[] }[];
}

export interface CreateSandboxInput {
  tenantId: string;
  sessionId: string;
  image?: string;
  workspace?: { storageClass?: string; size?: string; mountPath?: string };
  limits?: { cpuMillis?: number; memoryBytes?: number; maxRuntimeMs?: number };
  /** Undefined or 0: the service's idle period. */
  idleTimeoutMs?: number;
  /** Undefined: no network (default deny). */
  networkPolicy?: NetworkPolicyInput;
}

export interface ExecInput {
  sandboxId: string;
  command: string;
  args?: string[];
  env?: Record<string, string>;
  workingDir?: string;
  /** Undefined or 0 = unset. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Names the exec for SendExecInput / ResizeExecTerminal (issue 27); required with stdin or terminal. */
  execId?: string;
  /** Keeps the command's stdin open for SendExecInput. */
  stdin?: boolean;
  /** Runs the command on a pseudo-terminal of this size (0: 24 x 80). */
  terminal?: { rows: number; cols: number };
}

export interface SandboxView {
  sandboxId: string;
  status: SandboxState;
  createdAt: Date;
  uptimeMs: number;
  usage: Usage;
  networkPolicy?: NetworkPolicy;
}

const STATE_OF_PHASE = {
  starting: "STARTING",
  ready: "READY",
  paused: "PAUSED",
  failed: "FAILED",
  gone: "DESTROYED",
} as const;

/** What the domain knows of a sandbox's use, for its idle pause. */
interface Activity {
  /** The sandbox's idle period; 0 = never paused for idleness. */
  idleMs: number;
  /** Execs streaming and file calls running now. */
  busy: number;
  timer?: NodeJS.Timeout;
}

/**
 * The compute domain: validation, defaults, the sandbox state table and its
 * persistence, exec deadlines and the workspace path rule 1. Transport-free:
 * the Connect service in server.ts only converts messages.
 */
export class ComputeDomain {
  private readonly driver: SandboxDriver;
  private readonly store: SandboxStore;
  private readonly defaults: SandboxDefaults;
  /** ImportImage, ListImages, DeleteImage, BuildImage (issue 22), and the image check of a create. */
  readonly images: ImageOps;
  private readonly readyTimeoutMs: number;
  private readonly log?: Logger;
  private unsubscribe?: () => void;
  /** Status writes in flight, so tests and shutdown can wait for them. */
  private pending = new Set<Promise<unknown>>();
  /** mount_path of the sandboxes seen here (it never changes), for execs on READY ones. */
  private readonly mountPaths = new Map<string, string>();
  /** The latest event-driven status write per sandbox while it runs, for reconcile to join. */
  private readonly persisting = new Map<string, Promise<SandboxRecord | undefined>>();
  private readonly idlePauseMs: number;
  /** Use and idle timers of the sandboxes seen here. */
  private readonly activity = new Map<string, Activity>();
  /** Pause, resume and destroy of one sandbox run one at a time. */
  private readonly ops = new KeyedLock();
  private readonly networkEvents: NetworkEventStore;
  /** The input of running execs started with stdin or a terminal (issue 27). */
  private readonly inputs = new ExecInputs();

  constructor(options: ComputeDomainOptions) {
    this.networkEvents = options.networkEvents ?? new MemoryNetworkEventStore();
    this.driver = options.driver;
    this.images = new ImageOps(options.driver, options.defaults.image);
    this.store = options.store;
    this.defaults = options.defaults;
    this.readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
    this.idlePauseMs = options.idlePauseMs ?? LIMITS.defaultIdlePauseMs;
    this.log = options.logger;
  }

  /**
   * Subscribes to driver phase changes and re-attaches to the sandboxes the
   * store says are live. A sandbox whose processes survived a restart of
   * this service is adopted and stays READY (its deadline keeps counting
   * from its creation); one whose processes are gone becomes FAILED (lost).
   */
  async start(): Promise<void> {
    this.unsubscribe = this.driver.onPhaseChange((id, o) => {
      // Ready (started or resumed): idle from now. Anything else: no idle pause pending.
      if (o.phase === "ready") this.armIdle(id);
      else this.disarmIdle(id);
      this.track(this.inFlight(id, this.persistPhase(id, o)));
    });
    for (const record of await this.store.listLive()) {
      try {
        this.activity.set(record.id, { idleMs: record.idleTimeoutMs, busy: 0 });
        const observation = await this.driver.recover(specOf(record));
        await this.persistPhase(record.id, observation);
        if (observation.phase === "ready") this.armIdle(record.id);
      } catch (err) {
        this.log?.error({ err, sandboxId: record.id }, "sandbox recovery failed");
        await this.store.transition(record.id, "FAILED", { failureReason: "lost" });
      }
    }
    // Before any request: what recovery did not reach (a record that ended unseen, a recovery that failed) is marked for collection.
    await this.driver.reconcile?.().catch((err) => this.log?.error({ err }, "reconciling sandbox directories failed"));
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    for (const id of this.activity.keys()) this.disarmIdle(id);
    await this.settle();
  }

  /** Waits for status writes triggered by driver events. */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  /** In a span (its database writes and the driver's create), named for the trace of the call that asked. */
  createSandbox(input: CreateSandboxInput): Promise<{ sandboxId: string; status: SandboxState; createdAt: Date }> {
    return inWorkSpan("sandbox create", { "sandbox.driver": this.driver.name }, (span) => this.create(input, span));
  }

  private async create(
    input: CreateSandboxInput,
    span: WorkSpan,
  ): Promise<{ sandboxId: string; status: SandboxState; createdAt: Date }> {
    requireUuid("tenant_id", input.tenantId, ComputeReason.invalidArgument);
    requireUuid("session_id", input.sessionId, ComputeReason.invalidArgument);
    checkSandboxStrings(input);
    const limits = input.limits ?? {};
    const cpuMillis = limits.cpuMillis || LIMITS.defaultCpuMillis;
    const memoryBytes = limits.memoryBytes || LIMITS.defaultMemoryBytes;
    const maxRuntimeMs = limits.maxRuntimeMs || LIMITS.defaultMaxRuntimeMs;
    if (cpuMillis < LIMITS.minCpuMillis || cpuMillis > LIMITS.maxCpuMillis) {
      throw invalid(`limits.cpu_millis must be between ${LIMITS.minCpuMillis} and ${LIMITS.maxCpuMillis}`);
    }
    if (memoryBytes < LIMITS.minMemoryBytes || memoryBytes > LIMITS.maxMemoryBytes) {
      throw invalid(`limits.memory_bytes must be between ${LIMITS.minMemoryBytes} and ${LIMITS.maxMemoryBytes}`);
    }
    if (maxRuntimeMs < 0 || maxRuntimeMs > LIMITS.maxMaxRuntimeMs) {
      throw invalid(`limits.max_runtime must be positive and at most ${LIMITS.maxMaxRuntimeMs / 3_600_000} h`);
    }
    const idleTimeoutMs = input.idleTimeoutMs || this.idlePauseMs;
    if (idleTimeoutMs < 0 || idleTimeoutMs > LIMITS.maxIdleTimeoutMs) {
      throw invalid(`idle_timeout must be positive and at most ${LIMITS.maxIdleTimeoutMs / 3_600_000} h`);
    }
    const mountPath = cleanMountPath(input.workspace?.mountPath || LIMITS.defaultMountPath);
    const workspaceSize = input.workspace?.size || this.defaults.workspaceSize;
    workspaceSizeBytes(workspaceSize);
    const networkPolicy = input.networkPolicy ? validateNetworkPolicy(input.networkPolicy) : null;
    if (networkPolicy && !this.driver.setNetworkPolicy) throw noNetwork(this.driver.name);
    this.images.check(input.image || this.defaults.image);
    const now = new Date();
    const record: SandboxRecord = {
      id: randomUUID(),
      tenantId: input.tenantId.toLowerCase(),
      sessionId: input.sessionId.toLowerCase(),
      image: input.image || this.defaults.image,
      storageClass: input.workspace?.storageClass || this.defaults.storageClass,
      workspaceSize,
      mountPath,
      cpuMillis,
      memoryBytes,
      maxRuntimeMs,
      idleTimeoutMs,
      pausedMs: 0,
      pausedAt: null,
      status: "STARTING",
      failureReason: null,
      driver: this.driver.name,
      createdAt: now,
      updatedAt: now,
      destroyedAt: null,
      totalUsage: null,
      networkPolicy,
    };
    span.set({ "sandbox.id": record.id });
    await this.store.insert(record);
    this.mountPaths.set(record.id, mountPath);
    this.activity.set(record.id, { idleMs: idleTimeoutMs, busy: 0 });
    try {
      await this.driver.create(specOf(record));
    } catch (err) {
      await this.store.transition(record.id, "FAILED", { failureReason: "start_error" });
      this.log?.error({ err, sandboxId: record.id }, "sandbox creation failed");
      throw err instanceof PlatformError && err.code !== Code.Internal
        ? err
        : PlatformError.internal("sandbox creation failed", err);
    }
    return { sandboxId: record.id, status: "STARTING", createdAt: now };
  }

  async describeSandbox(sandboxId: string): Promise<SandboxView> {
    const record = await this.reconcile(await this.record(sandboxId));
    const usage =
      record.status === "DESTROYED"
        ? (record.totalUsage ?? zeroUsage())
        : await this.driver.usage(sandboxId).catch(() => zeroUsage());
    return {
      sandboxId,
      status: record.status,
      createdAt: record.createdAt,
      uptimeMs: Math.max(0, Date.now() - record.createdAt.getTime()),
      usage,
      ...(record.networkPolicy ? { networkPolicy: record.networkPolicy } : {}),
    };
  }

  /**
   * UpdateNetworkPolicy: validates and stores the policy, and hands it to the
   * driver, whose proxy applies it to the next connection. A FAILED or
   * DESTROYED sandbox is FAILED_PRECONDITION.
   */
  async updateNetworkPolicy(
    sandboxId: string,
    input: NetworkPolicyInput | undefined,
  ): Promise<{ sandboxId: string; networkPolicy?: NetworkPolicy }> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    const policy = input ? validateNetworkPolicy(input) : undefined;
    const setPolicy = this.driver.setNetworkPolicy?.bind(this.driver);
    if (!setPolicy) throw noNetwork(this.driver.name);
    const id = (await this.record(sandboxId)).id;
    return this.ops.run(id, async () => {
      const record = await this.reconcile(await this.record(id));
      if (record.status === "FAILED" || record.status === "DESTROYED") throw notRunnable(record);
      await this.store.setNetworkPolicy(id, policy ?? null);
      await setPolicy(id, policy);
      return { sandboxId, ...(policy ? { networkPolicy: policy } : {}) };
    });
  }

  /** ListNetworkEvents: the sandbox's connection attempts after the token's position, oldest first. */
  async listNetworkEvents(
    sandboxId: string,
    pageSize = 0,
    pageToken = "",
  ): Promise<{ events: NetworkEventRecord[]; nextPageToken: string }> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    if (pageSize < 0) throw invalid("page_size must not be negative");
    const limit = pageSize === 0 ? 100 : Math.min(pageSize, 1000);
    const after = parseEventToken(pageToken);
    const id = (await this.record(sandboxId)).id;
    const events = await this.networkEvents.list(id, after, limit);
    const last = events.at(-1)?.seq ?? after;
    return { events, nextPageToken: eventToken(last) };
  }

  async destroySandbox(sandboxId: string): Promise<{ sandboxId: string; usage: Usage }> {
    const id = (await this.record(sandboxId)).id;
    // After a pause or resume of it in flight: a resume racing a destroy either
    // finishes first (then the sandbox is destroyed) or finds it DESTROYED.
    return this.ops.run(id, () => this.destroyLocked(sandboxId));
  }

  private async destroyLocked(sandboxId: string): Promise<{ sandboxId: string; usage: Usage }> {
    const record = await this.record(sandboxId);
    this.disarmIdle(record.id);
    if (record.status === "DESTROYED") return { sandboxId, usage: record.totalUsage ?? zeroUsage() };
    let usage: Usage;
    try {
      usage = await this.driver.destroy(sandboxId);
    } catch (err) {
      if (!(err instanceof PlatformError && err.code === Code.NotFound))
        throw PlatformError.internal("sandbox deletion failed", err);
      usage = zeroUsage(); // the driver never knew it (lost before a restart)
    }
    this.mountPaths.delete(record.id);
    this.activity.delete(record.id);
    const after = await this.store.transition(record.id, "DESTROYED", { totalUsage: usage, destroyedAt: new Date() });
    return { sandboxId, usage: after?.totalUsage ?? usage };
  }

  /**
   * Validates, waits for READY, then streams the driver's events. Always ends
   * with one `completed` event once streaming has begun. A timeout (unset or
   * above 600 s → 600 s) stops the process like a cancel but reports
   * exit_code 124 and cancelled=false, after a stderr note.
   */
  async *execCommand(input: ExecInput): AsyncGenerator<ExecEvent> {
    requireUuid("sandbox_id", input.sandboxId, ComputeReason.invalidArgument);
    const env = input.env ?? {};
    checkCommandLine({ command: input.command, args: input.args ?? [], env });
    if (input.timeoutMs !== undefined && input.timeoutMs < 0) throw invalid("timeout must not be negative");
    const timeoutMs = execTimeoutMs(input.timeoutMs);
    if (input.workingDir) {
      if (input.workingDir.includes("\0")) throw invalid("working_dir must not contain NUL bytes");
      checkPathLimits(input.workingDir, "working_dir");
    }
    // Registered before any wait, so input sent while the sandbox starts is queued, not refused.
    const stdin = this.openInput(input);
    // In use from here to the stream's end: no idle pause meanwhile, and a pause asked for now is refused.
    const release = this.hold(input.sandboxId);
    // The program only: its arguments may hold what the caller would not have in a trace.
    const span = startWorkSpan("sandbox exec", {
      "sandbox.id": input.sandboxId,
      "process.executable.name": input.command,
    });
    // The timeout runs from the start of the command, not from a wait for the sandbox (resume, STARTING).
    const controller = new AbortController();
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort(new Error("exec timeout"));
      }, timeoutMs);
    };
    const onAbort = () => controller.abort(input.signal?.reason);
    if (input.signal?.aborted) controller.abort(input.signal.reason);
    input.signal?.addEventListener("abort", onAbort, { once: true });
    let events: AsyncIterator<ExecEvent> | undefined;
    try {
      const request = (mountPath: string): ExecRequest => {
        const workingDir = input.workingDir ? inSandboxView(input.workingDir, mountPath) : mountPath;
        checkPathLimits(workingDir, "working_dir");
        return {
          command: input.command,
          args: input.args ?? [],
          env,
          workingDir,
          signal: controller.signal,
          ...(stdin ? { input: stdin.channel } : {}),
          ...(input.terminal ? { terminal: terminalSize(input.terminal) } : {}),
        };
      };
      const opened = await this.openExec(input, request, arm);
      events = opened.events;
      for (let next = opened.first; !next.done; next = await events.next()) {
        let event = next.value;
        if (event.type === "completed" && timedOut && !input.signal?.aborted) {
          yield {
            type: "stderr",
            data: new TextEncoder().encode(`[compute] command timed out after ${timeoutMs / 1000} s\n`),
          };
          event = { ...event, exitCode: 124, cancelled: false };
        }
        if (event.type === "completed")
          span.set({ "process.exit.code": event.exitCode, "sandbox.exec.cancelled": event.cancelled });
        yield event;
      }
      events = undefined;
    } catch (err) {
      span.fail(err);
      throw err;
    } finally {
      clearTimeout(timer);
      input.signal?.removeEventListener("abort", onAbort);
      // Left early (the caller went away): the driver ends the command.
      await events?.return?.();
      stdin?.close();
      span.end();
      release();
    }
  }

  /** The input channel of an exec with stdin or a terminal; undefined for one without. */
  private openInput(input: ExecInput): { channel: ExecInputChannel; close: () => void } | undefined {
    if (!input.stdin && !input.terminal) return undefined;
    if (!this.driver.execInput)
      throw PlatformError.failedPrecondition(
        `the ${this.driver.name} driver cannot give a command input or a terminal`,
        ComputeReason.execInputUnsupported,
      );
    requireUuid("exec_id", input.execId ?? "", ComputeReason.invalidArgument);
    if (input.terminal) terminalSize(input.terminal);
    return this.inputs.open(input.sandboxId, input.execId as string, !!input.terminal);
  }

  /**
   * SendExecInput: queues data for the stdin (or terminal) of a running exec
   * of this sandbox, then closes it when eof. NOT_FOUND unless the exec runs
   * there with input.
   */
  async sendExecInput(sandboxId: string, execId: string, data: Uint8Array, eof: boolean): Promise<void> {
    const channel = await this.inputOf(sandboxId, execId);
    if (data.length > MAX_INPUT_CHUNK_BYTES) {
      throw PlatformError.invalidArgument(
        `data is ${data.length} bytes; at most ${MAX_INPUT_CHUNK_BYTES} per call`,
        ComputeReason.payloadTooLarge,
      );
    }
    channel.push(data, eof);
  }

  /** ResizeExecTerminal: the terminal of a running exec of this sandbox gets a new window size. */
  async resizeExecTerminal(sandboxId: string, execId: string, size: { rows: number; cols: number }): Promise<void> {
    const channel = await this.inputOf(sandboxId, execId);
    const checked = terminalSize(size);
    if (!channel.terminal) throw PlatformError.failedPrecondition("the exec has no terminal (start it with terminal)");
    await channel.resize(checked);
  }

  private async inputOf(sandboxId: string, execId: string): Promise<ExecInputChannel> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    requireUuid("exec_id", execId, ComputeReason.invalidArgument);
    const channel = this.inputs.get(sandboxId, execId);
    if (channel) return channel;
    await this.record(sandboxId); // NOT_FOUND sandbox_not_found for an unknown sandbox
    throw PlatformError.notFound(
      `no exec ${execId} with input runs in sandbox ${sandboxId}`,
      ComputeReason.execNotFound,
    );
  }

  /**
   * The driver's stream of an exec and its first event. For a sandbox this
   * process created or read (its mount_path known), the exec is asked of the
   * driver at once, one call down: every change of a sandbox reaches the
   * driver before its record (a failure is seen by the driver, destroy stops
   * it first), so a driver that runs it is right, with no database read, and
   * one that refuses it as not runnable or unknown does so before running
   * anything. Only then is the sandbox resumed or waited for through its
   * record and the exec asked again. `arm` starts the timeout with each try.
   */
  private async openExec(
    input: ExecInput,
    request: (mountPath: string) => ExecRequest,
    arm: () => void,
  ): Promise<{ first: IteratorResult<ExecEvent>; events: AsyncIterator<ExecEvent> }> {
    const attempt = async (mountPath: string) => {
      const r = request(mountPath);
      arm();
      const events = this.driver.exec(input.sandboxId, r)[Symbol.asyncIterator]();
      return { first: await events.next(), events };
    };
    // A pause (or resume, destroy) in flight goes first: the exec then sees what it left.
    await this.ops.idle(input.sandboxId.toLowerCase());
    const known = this.mountPaths.get(input.sandboxId.toLowerCase());
    if (known !== undefined) {
      try {
        return await attempt(known);
      } catch (err) {
        const refused =
          err instanceof PlatformError &&
          (err.reason === ComputeReason.sandboxNotRunnable || err.reason === ComputeReason.sandboxNotFound);
        if (!refused) throw err;
      }
    }
    return attempt((await this.runnable(input.sandboxId, input.signal)).mountPath);
  }

  async readFile(sandboxId: string, path: string, offset = 0, maxBytes = 0): Promise<ReadResult> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    if (!path) throw invalid("path is required");
    checkPathLimits(path, "path");
    if (offset < 0) throw invalid("offset must not be negative");
    if (maxBytes < 0) throw invalid("max_bytes must not be negative");
    return this.using(sandboxId, async (record) => {
      const rel = cleanWorkspacePath(path, record.mountPath);
      const cap = maxBytes === 0 || maxBytes > LIMITS.maxFileChunkBytes ? LIMITS.maxFileChunkBytes : maxBytes;
      return this.driver.readFile(sandboxId, rel, offset, cap);
    });
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array, append = false, mode = 0): Promise<number> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    if (!path) throw invalid("path is required");
    checkPathLimits(path, "path");
    if (data.length > LIMITS.maxFileChunkBytes) {
      throw PlatformError.invalidArgument(
        `data is ${data.length} bytes; at most ${LIMITS.maxFileChunkBytes} per call (chunk with append)`,
        ComputeReason.payloadTooLarge,
      );
    }
    if (mode > 0o7777) throw invalid("mode must be permission bits (at most 07777)");
    return this.using(sandboxId, async (record) => {
      const rel = cleanWorkspacePath(path, record.mountPath);
      if (rel === "") throw invalid("path names the workspace root, not a file");
      return this.driver.writeFile(sandboxId, rel, data, append, mode);
    });
  }

  async listFiles(sandboxId: string, path: string, recursive = false, maxEntries = 0): Promise<ListResult> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    checkPathLimits(path, "path");
    return this.using(sandboxId, async (record) => {
      const rel = cleanWorkspacePath(path, record.mountPath);
      const max = maxEntries === 0 ? LIMITS.defaultListEntries : Math.min(maxEntries, LIMITS.maxListEntries);
      return this.driver.listFiles(sandboxId, rel, recursive, max);
    });
  }

  /**
   * PauseSandbox: stops a READY sandbox's processes (the driver's way) and
   * keeps its workspace; waits for a STARTING one first. PAUSED already: at
   * once. FAILED_PRECONDITION while an exec or file call runs on it
   * (sandbox_busy), or when it is FAILED or DESTROYED.
   */
  async pauseSandbox(sandboxId: string): Promise<SandboxState> {
    const id = (await this.record(sandboxId)).id;
    return this.ops.run(id, () => this.pauseLocked(id, false));
  }

  /**
   * ResumeSandbox: a PAUSED sandbox becomes READY again (as ExecCommand and
   * the file calls do by themselves); a STARTING one is waited for like
   * ExecCommand does; READY at once; FAILED_PRECONDITION when FAILED or
   * DESTROYED.
   */
  async resumeSandbox(sandboxId: string, signal?: AbortSignal): Promise<SandboxState> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    return this.using(sandboxId, async (record) => record.status, signal);
  }

  // --- internals ---

  private async record(sandboxId: string): Promise<SandboxRecord> {
    requireUuid("sandbox_id", sandboxId, ComputeReason.invalidArgument);
    const record = await this.store.get(sandboxId.toLowerCase());
    if (!record) throw PlatformError.notFound(`sandbox ${sandboxId} not found`, ComputeReason.sandboxNotFound);
    if (record.status === "DESTROYED") this.mountPaths.delete(record.id);
    else this.mountPaths.set(record.id, record.mountPath);
    const activity = this.activity.get(record.id);
    if (activity) activity.idleMs = record.idleTimeoutMs;
    else if (record.status !== "DESTROYED") this.activity.set(record.id, { idleMs: record.idleTimeoutMs, busy: 0 });
    return record;
  }

  /** Runs fn on the record of a runnable sandbox (resumed or waited for), held in use meanwhile. */
  private async using<T>(
    sandboxId: string,
    fn: (record: SandboxRecord) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const release = this.hold(sandboxId);
    try {
      return await fn(await this.runnable(sandboxId, signal));
    } finally {
      release();
    }
  }

  /**
   * Marks the sandbox in use (an exec streaming, a file call) until the
   * returned function is called: no idle pause meanwhile, and PauseSandbox is
   * refused. Synchronous, before any wait, so a pause decided later sees it.
   */
  private hold(sandboxId: string): () => void {
    const id = sandboxId.toLowerCase();
    let activity = this.activity.get(id);
    if (!activity) {
      activity = { idleMs: 0, busy: 0 };
      this.activity.set(id, activity);
    }
    const held = activity;
    held.busy++;
    this.disarmIdle(id);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      held.busy--;
      if (held.busy > 0) return;
      // Idle from now; an id never seen as a live sandbox (unknown, destroyed) is forgotten.
      if (this.mountPaths.has(id) && this.activity.get(id) === held) this.armIdle(id);
      else if (this.activity.get(id) === held) this.activity.delete(id);
    };
  }

  /** (Re)starts the idle period of a READY sandbox that nothing uses; at its end the sandbox is paused. */
  private armIdle(id: string): void {
    const activity = this.activity.get(id);
    if (!activity || activity.busy > 0 || activity.idleMs <= 0) return;
    clearTimeout(activity.timer);
    activity.timer = setTimeout(() => {
      activity.timer = undefined;
      this.track(
        this.ops
          .run(id, () => this.pauseLocked(id, true))
          .catch((err) => {
            this.log?.warn({ err, sandboxId: id }, "pausing an idle sandbox failed");
          }),
      );
    }, activity.idleMs);
    // The service's lifetime is not the timer's business (a stopping service pauses nothing).
    activity.timer.unref();
  }

  private disarmIdle(id: string): void {
    const activity = this.activity.get(id);
    if (activity?.timer) {
      clearTimeout(activity.timer);
      activity.timer = undefined;
    }
  }

  /**
   * Pauses under the sandbox's lock. idle: the idle timer's pause, which
   * gives way quietly to anything that happened since (an exec started, the
   * sandbox failed, was destroyed or paused already).
   */
  private async pauseLocked(id: string, idle: boolean): Promise<SandboxState> {
    let record = await this.reconcile(await this.record(id));
    if (record.status === "PAUSED") return record.status;
    if (idle && (record.status !== "READY" || (this.activity.get(id)?.busy ?? 0) > 0)) return record.status;
    if (record.status === "STARTING") record = await this.settled(record, undefined);
    if (record.status !== "READY") throw notRunnable(record);
    const busy = this.activity.get(id)?.busy ?? 0;
    if (busy > 0) {
      throw PlatformError.failedPrecondition("sandbox is running a command or a file call", ComputeReason.sandboxBusy, {
        running: String(busy),
      });
    }
    this.disarmIdle(id);
    try {
      await this.driver.pause(id);
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.FailedPrecondition)
        throw notRunnable(await this.reconcile(await this.record(id)));
      throw err instanceof PlatformError && err.code !== Code.Internal
        ? err
        : PlatformError.internal("pausing the sandbox failed", err);
    }
    const after = await this.store.transition(id, "PAUSED", { pausedAt: new Date() });
    if (idle) this.log?.info({ sandboxId: id, idleMs: this.activity.get(id)?.idleMs }, "idle sandbox paused");
    return after?.status ?? "PAUSED";
  }

  /**
   * Resumes a PAUSED sandbox under its lock and returns its record after:
   * READY, or whatever it became meanwhile (destroyed by a destroy that went
   * first, resumed by another call) for the caller to judge.
   */
  private async resume(
    id: string,
    seen: SandboxRecord | Promise<SandboxRecord>,
    signal?: AbortSignal,
  ): Promise<SandboxRecord> {
    if (seen instanceof Promise) seen.catch(() => {}); // judged below, after the lock
    // Uncontended (the common case: an exec on a sandbox idle long enough to pause), the record just read holds.
    const contended = this.ops.busy(id);
    const release = await this.ops.acquire(id);
    let released = false;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error("ready timeout")), this.readyTimeoutMs);
    try {
      const waitSignal = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
      // The record still being read (runnable's fast path): the driver resumes meanwhile.
      const resuming = !contended && seen instanceof Promise ? this.driver.resume(id, waitSignal) : undefined;
      resuming?.catch(() => {});
      let record: SandboxRecord;
      try {
        record = contended ? await this.reconcile(await this.record(id)) : await seen;
      } catch (err) {
        await resuming?.catch(() => {});
        throw err;
      }
      if (record.status !== "PAUSED") {
        if (!resuming) return record;
        // Not what the driver held: whatever it is once the driver's resume is over.
        await resuming.catch(() => {});
        return this.reconcile(await this.record(id));
      }
      let observation: SandboxObservation;
      try {
        observation = await (resuming ?? this.driver.resume(id, waitSignal));
      } catch (err) {
        if (deadline.signal.aborted)
          throw PlatformError.deadlineExceeded("sandbox did not resume in time", ComputeReason.readyTimeout);
        if (signal?.aborted) throw new PlatformError(Code.Canceled, "cancelled", "the call was cancelled");
        if (err instanceof PlatformError && err.code === Code.FailedPrecondition)
          return this.reconcile(await this.record(id));
        throw PlatformError.internal("resuming the sandbox failed", err);
      }
      if (observation.phase !== "ready") return (await this.persistPhase(id, observation)) ?? record;
      // max_runtime counts running time: this pause is left out of it from now on (also after a restart).
      const pausedMs = record.pausedMs + Math.max(0, Date.now() - (record.pausedAt?.getTime() ?? Date.now()));
      // The caller goes on at once (its exec is the point); the lock is held until the
      // record says READY, so a pause or destroy after it sees the record it left.
      // A describe meanwhile sees the driver READY and the row PAUSED: reconcile waits for this write.
      const write = this.inFlight(id, this.store.transition(id, "READY", { pausedAt: null, pausedMs }));
      released = true;
      this.track(write.finally(release));
      return { ...record, status: "READY", pausedAt: null, pausedMs };
    } finally {
      clearTimeout(timer);
      if (!released) release();
    }
  }

  /** Brings a live record up to date with the driver (events are applied asynchronously). */
  private async reconcile(record: SandboxRecord): Promise<SandboxRecord> {
    if (record.status !== "STARTING" && record.status !== "READY" && record.status !== "PAUSED") return record;
    const observation = await this.driver.observe(record.id).catch(() => undefined);
    // The common case on every exec: nothing changed, so no write (and no re-read).
    const state = STATE_OF_PHASE[observation?.phase ?? "starting"];
    if (!observation || state === record.status) return record;
    // The driver's event is usually being stored right now (a sandbox READY at
    // create): wait for that write instead of racing it for the row.
    const inFlight = await this.persisting.get(record.id)?.catch(() => undefined);
    if (inFlight?.status === state) return inFlight;
    return (await this.persistPhase(record.id, observation)) ?? record;
  }

  /**
   * The record of a sandbox that can run commands now: resumed if it is
   * paused, waited for if it is starting (as ExecCommand waits for STARTING).
   */
  private async runnable(sandboxId: string, signal?: AbortSignal): Promise<SandboxRecord> {
    const id = sandboxId.toLowerCase();
    await this.ops.idle(id);
    let record: SandboxRecord;
    // Every change reaches the driver before the record, so a driver that holds the
    // sandbox paused (an exec on one idle long enough) is believed at once: its resume
    // starts now and the record is read meanwhile instead of before it, with no
    // reconcile (the read is 2-3 ms of a released sandbox's ~50 ms resume here).
    const paused =
      this.mountPaths.has(id) && (await this.driver.observe(id).catch(() => undefined))?.phase === "paused";
    if (paused && !this.ops.busy(id)) record = await this.resume(id, this.record(sandboxId), signal);
    else {
      record = await this.reconcile(await this.record(sandboxId));
      if (record.status === "PAUSED") record = await this.resume(record.id, record, signal);
    }
    if (record.status === "STARTING") record = await this.settled(record, signal);
    if (record.status !== "READY") throw notRunnable(record);
    return record;
  }

  /** A STARTING sandbox's record once the driver says it settled (ready or failed), within the ready timeout. */
  private async settled(record: SandboxRecord, signal: AbortSignal | undefined): Promise<SandboxRecord> {
    // A ref'd timer (AbortSignal.timeout is unref'd): the wait itself keeps the process alive.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error("ready timeout")), this.readyTimeoutMs);
    const waitSignal = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
    let observation: SandboxObservation;
    try {
      observation = await this.driver.waitSettled(record.id, waitSignal);
    } catch (err) {
      if (deadline.signal.aborted) {
        throw PlatformError.deadlineExceeded("sandbox did not become ready in time", ComputeReason.readyTimeout);
      }
      if (signal?.aborted) throw new PlatformError(Code.Canceled, "cancelled", "the call was cancelled");
      throw PlatformError.internal("waiting for the sandbox failed", err);
    } finally {
      clearTimeout(timer);
    }
    return (await this.persistPhase(record.id, observation)) ?? record;
  }

  private async persistPhase(sandboxId: string, o: SandboxObservation): Promise<SandboxRecord | undefined> {
    const to = STATE_OF_PHASE[o.phase];
    if (to === "STARTING") return this.store.get(sandboxId);
    // Only the domain pauses and resumes (it stores the paused time with them):
    // a driver's "ready" ends a start, never a pause; its "paused" is stored by pauseLocked.
    if (to === "PAUSED") return this.store.get(sandboxId);
    if (to === "READY") return this.store.transition(sandboxId, "READY", { from: ["STARTING"] });
    if (to === "DESTROYED") return this.store.get(sandboxId); // only DestroySandbox destroys (it stores the usage)
    if (to === "FAILED") {
      this.log?.warn({ sandboxId, reason: o.reason, exitCode: o.exitCode }, "sandbox failed");
      return this.store.transition(sandboxId, "FAILED", {
        failureReason: (o.reason ?? "exited") satisfies FailureReason,
      });
    }
    return this.store.transition(sandboxId, to);
  }

  /** A status write under way, for reconcile to wait for instead of racing it for the row. */
  private inFlight(id: string, write: Promise<SandboxRecord | undefined>): Promise<SandboxRecord | undefined> {
    this.persisting.set(id, write);
    const forget = () => {
      if (this.persisting.get(id) === write) this.persisting.delete(id);
    };
    write.then(forget, forget);
    return write;
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err) => this.log?.error({ err }, "sandbox status update failed"));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }
}

/** Spec rule 4 of ExecCommand: a timeout that is unset or above 600 s is 600 s. */
export function execTimeoutMs(requested: number | undefined): number {
  return !requested || requested > LIMITS.maxExecTimeoutMs ? LIMITS.maxExecTimeoutMs : requested;
}

export function specOf(record: SandboxRecord): SandboxSpec {
  return {
    sandboxId: record.id,
    tenantId: record.tenantId,
    sessionId: record.sessionId,
    image: record.image,
    workspace: { storageClass: record.storageClass, size: record.workspaceSize, mountPath: record.mountPath },
    limits: { cpuMillis: record.cpuMillis, memoryBytes: record.memoryBytes, maxRuntimeMs: record.maxRuntimeMs },
    createdAt: record.createdAt,
    pausedMs: record.pausedMs,
    ...(record.status === "PAUSED" && record.pausedAt ? { pausedAt: record.pausedAt } : {}),
    ...(record.networkPolicy ? { networkPolicy: record.networkPolicy } : {}),
  };
}

function eventToken(seq: number): string {
  return Buffer.from(`ne1:${seq}`).toString("base64url");
}

function parseEventToken(token: string): number {
  if (token === "") return 0;
  const m = /^ne1:(\d{1,15})$/.exec(Buffer.from(token, "base64url").toString("latin1"));
  if (!m || token.length > 64) throw invalid("page_token is not a token of ListNetworkEvents");
  return Number(m[1]);
}

function noNetwork(driver: string): PlatformError {
  return PlatformError.failedPrecondition(`the ${driver} driver cannot give sandboxes a network`);
}

function notRunnable(record: SandboxRecord): PlatformError {
  return PlatformError.failedPrecondition(
    `sandbox is ${record.status}${record.failureReason ? ` (${record.failureReason})` : ""}`,
    ComputeReason.sandboxNotRunnable,
    { status: record.status, ...(record.failureReason ? { failure_reason: record.failureReason } : {}) },
  );
}

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}
