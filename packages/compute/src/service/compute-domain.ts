import { randomUUID } from "node:crypto";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import {
  type ExecEvent,
  type FailureReason,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  type Usage,
  zeroUsage,
} from "../driver.ts";
import { checkPathLimits, inSandboxView } from "../path-limits.ts";
import { cleanMountPath, cleanWorkspacePath } from "../paths.ts";
import type { SandboxRecord, SandboxState, SandboxStore } from "../store/sandbox-store.ts";
import { checkCommandLine } from "./exec-args.ts";
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
  logger?: Logger;
}

export interface CreateSandboxInput {
  tenantId: string;
  sessionId: string;
  image?: string;
  workspace?: { storageClass?: string; size?: string; mountPath?: string };
  limits?: { cpuMillis?: number; memoryBytes?: number; maxRuntimeMs?: number };
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
}

export interface SandboxView {
  sandboxId: string;
  status: SandboxState;
  createdAt: Date;
  uptimeMs: number;
  usage: Usage;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const STATE_OF_PHASE = { starting: "STARTING", ready: "READY", failed: "FAILED", gone: "DESTROYED" } as const;

/**
 * The compute domain: validation, defaults, the sandbox state table and its
 * persistence, exec deadlines and the workspace path rule 1. Transport-free:
 * the Connect service in server.ts only converts messages.
 */
export class ComputeDomain {
  private readonly driver: SandboxDriver;
  private readonly store: SandboxStore;
  private readonly defaults: SandboxDefaults;
  private readonly readyTimeoutMs: number;
  private readonly log?: Logger;
  private unsubscribe?: () => void;
  /** Status writes in flight, so tests and shutdown can wait for them. */
  private pending = new Set<Promise<unknown>>();
  /** mount_path of the sandboxes seen here (it never changes), for execs on READY ones. */
  private readonly mountPaths = new Map<string, string>();
  /** The latest event-driven status write per sandbox while it runs, for reconcile to join. */
  private readonly persisting = new Map<string, Promise<SandboxRecord | undefined>>();

  constructor(options: ComputeDomainOptions) {
    this.driver = options.driver;
    this.store = options.store;
    this.defaults = options.defaults;
    this.readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
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
      const write = this.persistPhase(id, o);
      this.persisting.set(id, write);
      const forget = () => {
        if (this.persisting.get(id) === write) this.persisting.delete(id);
      };
      write.then(forget, forget);
      this.track(write);
    });
    for (const record of await this.store.listLive()) {
      try {
        const observation = await this.driver.recover(specOf(record));
        await this.persistPhase(record.id, observation);
      } catch (err) {
        this.log?.error({ err, sandboxId: record.id }, "sandbox recovery failed");
        await this.store.transition(record.id, "FAILED", { failureReason: "lost" });
      }
    }
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.settle();
  }

  /** Waits for status writes triggered by driver events. */
  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  async createSandbox(input: CreateSandboxInput): Promise<{ sandboxId: string; status: SandboxState; createdAt: Date }> {
    requireUuid(input.tenantId, "tenant_id");
    requireUuid(input.sessionId, "session_id");
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
    const mountPath = cleanMountPath(input.workspace?.mountPath || LIMITS.defaultMountPath);
    const workspaceSize = input.workspace?.size || this.defaults.workspaceSize;
    workspaceSizeBytes(workspaceSize);
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
      status: "STARTING",
      failureReason: null,
      driver: this.driver.name,
      createdAt: now,
      updatedAt: now,
      destroyedAt: null,
      totalUsage: null,
    };
    await this.store.insert(record);
    this.mountPaths.set(record.id, mountPath);
    try {
      await this.driver.create(specOf(record));
    } catch (err) {
      await this.store.transition(record.id, "FAILED", { failureReason: "start_error" });
      this.log?.error({ err, sandboxId: record.id }, "sandbox creation failed");
      throw err instanceof PlatformError && err.code !== Code.Internal ? err : PlatformError.internal("sandbox creation failed", err);
    }
    return { sandboxId: record.id, status: "STARTING", createdAt: now };
  }

  async describeSandbox(sandboxId: string): Promise<SandboxView> {
    const record = await this.reconcile(await this.record(sandboxId));
    const usage =
      record.status === "DESTROYED" ? (record.totalUsage ?? zeroUsage()) : await this.driver.usage(sandboxId).catch(() => zeroUsage());
    return {
      sandboxId,
      status: record.status,
      createdAt: record.createdAt,
      uptimeMs: Math.max(0, Date.now() - record.createdAt.getTime()),
      usage,
    };
  }

  async destroySandbox(sandboxId: string): Promise<{ sandboxId: string; usage: Usage }> {
    const record = await this.record(sandboxId);
    if (record.status === "DESTROYED") return { sandboxId, usage: record.totalUsage ?? zeroUsage() };
    let usage: Usage;
    try {
      usage = await this.driver.destroy(sandboxId);
    } catch (err) {
      if (!(err instanceof PlatformError && err.code === Code.NotFound)) throw PlatformError.internal("sandbox deletion failed", err);
      usage = zeroUsage(); // the driver never knew it (lost before a restart)
    }
    this.mountPaths.delete(record.id);
    const after = await this.store.transition(sandboxId, "DESTROYED", { totalUsage: usage, destroyedAt: new Date() });
    return { sandboxId, usage: after?.totalUsage ?? usage };
  }

  /**
   * Validates, waits for READY, then streams the driver's events. Always ends
   * with one `completed` event once streaming has begun. A timeout (unset or
   * above 600 s → 600 s) stops the process like a cancel but reports
   * exit_code 124 and cancelled=false, after a stderr note.
   */
  async *execCommand(input: ExecInput): AsyncGenerator<ExecEvent> {
    requireUuid(input.sandboxId, "sandbox_id");
    const env = input.env ?? {};
    checkCommandLine({ command: input.command, args: input.args ?? [], env });
    if (input.timeoutMs !== undefined && input.timeoutMs < 0) throw invalid("timeout must not be negative");
    const timeoutMs = execTimeoutMs(input.timeoutMs);
    if (input.workingDir) {
      if (input.workingDir.includes("\0")) throw invalid("working_dir must not contain NUL bytes");
      checkPathLimits(input.workingDir, "working_dir");
    }
    const mountPath = await this.runnableMountPath(input.sandboxId, input.signal);
    const workingDir = input.workingDir ? inSandboxView(input.workingDir, mountPath) : mountPath;
    checkPathLimits(workingDir, "working_dir");

    const controller = new AbortController();
    let timedOut = false;
    const onAbort = () => controller.abort(input.signal?.reason);
    if (input.signal?.aborted) controller.abort(input.signal.reason);
    input.signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error("exec timeout"));
    }, timeoutMs);
    try {
      for await (const event of this.driver.exec(input.sandboxId, {
        command: input.command,
        args: input.args ?? [],
        env,
        workingDir,
        signal: controller.signal,
      })) {
        if (event.type === "completed" && timedOut && !input.signal?.aborted) {
          yield { type: "stderr", data: new TextEncoder().encode(`[compute] command timed out after ${timeoutMs / 1000} s\n`) };
          yield { ...event, exitCode: 124, cancelled: false };
          continue;
        }
        yield event;
      }
    } finally {
      clearTimeout(timer);
      input.signal?.removeEventListener("abort", onAbort);
    }
  }

  async readFile(sandboxId: string, path: string, offset = 0, maxBytes = 0): Promise<ReadResult> {
    requireUuid(sandboxId, "sandbox_id");
    if (!path) throw invalid("path is required");
    checkPathLimits(path, "path");
    if (offset < 0) throw invalid("offset must not be negative");
    if (maxBytes < 0) throw invalid("max_bytes must not be negative");
    const record = await this.runnable(sandboxId);
    const rel = cleanWorkspacePath(path, record.mountPath);
    const cap = maxBytes === 0 || maxBytes > LIMITS.maxFileChunkBytes ? LIMITS.maxFileChunkBytes : maxBytes;
    return this.driver.readFile(sandboxId, rel, offset, cap);
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array, append = false, mode = 0): Promise<number> {
    requireUuid(sandboxId, "sandbox_id");
    if (!path) throw invalid("path is required");
    checkPathLimits(path, "path");
    if (data.length > LIMITS.maxFileChunkBytes) {
      throw PlatformError.invalidArgument(
        `data is ${data.length} bytes; at most ${LIMITS.maxFileChunkBytes} per call (chunk with append)`,
        ComputeReason.payloadTooLarge,
      );
    }
    if (mode > 0o7777) throw invalid("mode must be permission bits (at most 07777)");
    const record = await this.runnable(sandboxId);
    const rel = cleanWorkspacePath(path, record.mountPath);
    if (rel === "") throw invalid("path names the workspace root, not a file");
    return this.driver.writeFile(sandboxId, rel, data, append, mode);
  }

  async listFiles(sandboxId: string, path: string, recursive = false, maxEntries = 0): Promise<ListResult> {
    requireUuid(sandboxId, "sandbox_id");
    checkPathLimits(path, "path");
    const record = await this.runnable(sandboxId);
    const rel = cleanWorkspacePath(path, record.mountPath);
    const max = maxEntries === 0 ? LIMITS.defaultListEntries : Math.min(maxEntries, LIMITS.maxListEntries);
    return this.driver.listFiles(sandboxId, rel, recursive, max);
  }

  // --- internals ---

  private async record(sandboxId: string): Promise<SandboxRecord> {
    requireUuid(sandboxId, "sandbox_id");
    const record = await this.store.get(sandboxId.toLowerCase());
    if (!record) throw PlatformError.notFound(`sandbox ${sandboxId} not found`, ComputeReason.sandboxNotFound);
    if (record.status === "DESTROYED") this.mountPaths.delete(record.id);
    else this.mountPaths.set(record.id, record.mountPath);
    return record;
  }

  /** Brings a live record up to date with the driver (events are applied asynchronously). */
  private async reconcile(record: SandboxRecord): Promise<SandboxRecord> {
    if (record.status !== "STARTING" && record.status !== "READY") return record;
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
   * mount_path of a sandbox that can run commands now. For a sandbox this
   * process created or read, the driver saying READY is enough: every change
   * of a sandbox reaches the driver before its record (a failure is seen by
   * the driver, destroy stops it first), so the record cannot say otherwise,
   * and an exec needs no database read.
   */
  private async runnableMountPath(sandboxId: string, signal?: AbortSignal): Promise<string> {
    const known = this.mountPaths.get(sandboxId.toLowerCase());
    if (known !== undefined && (await this.driver.observe(sandboxId).catch(() => undefined))?.phase === "ready") return known;
    return (await this.runnable(sandboxId, signal)).mountPath;
  }

  /** The record of a sandbox that can run commands now, waiting for READY if it is starting. */
  private async runnable(sandboxId: string, signal?: AbortSignal): Promise<SandboxRecord> {
    let record = await this.reconcile(await this.record(sandboxId));
    if (record.status === "STARTING") {
      // A ref'd timer (AbortSignal.timeout is unref'd): the wait itself keeps the process alive.
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(new Error("ready timeout")), this.readyTimeoutMs);
      const waitSignal = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
      let observation: SandboxObservation;
      try {
        observation = await this.driver.waitSettled(sandboxId, waitSignal);
      } catch (err) {
        if (deadline.signal.aborted) {
          throw PlatformError.deadlineExceeded("sandbox did not become ready in time", ComputeReason.readyTimeout);
        }
        if (signal?.aborted) throw new PlatformError(Code.Canceled, "cancelled", "the call was cancelled");
        throw PlatformError.internal("waiting for the sandbox failed", err);
      } finally {
        clearTimeout(timer);
      }
      record = (await this.persistPhase(sandboxId, observation)) ?? record;
    }
    if (record.status !== "READY") {
      throw PlatformError.failedPrecondition(
        `sandbox is ${record.status}${record.failureReason ? ` (${record.failureReason})` : ""}`,
        ComputeReason.sandboxNotRunnable,
        { status: record.status, ...(record.failureReason ? { failure_reason: record.failureReason } : {}) },
      );
    }
    return record;
  }

  private async persistPhase(sandboxId: string, o: SandboxObservation): Promise<SandboxRecord | undefined> {
    const to = STATE_OF_PHASE[o.phase];
    if (to === "STARTING") return this.store.get(sandboxId);
    if (to === "DESTROYED") return this.store.get(sandboxId); // only DestroySandbox destroys (it stores the usage)
    if (to === "FAILED") {
      this.log?.warn({ sandboxId, reason: o.reason, exitCode: o.exitCode }, "sandbox failed");
      return this.store.transition(sandboxId, "FAILED", { failureReason: (o.reason ?? "exited") satisfies FailureReason });
    }
    return this.store.transition(sandboxId, to);
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
  };
}

function requireUuid(value: string, field: string): void {
  if (!value) throw invalid(`${field} is required`);
  if (!UUID.test(value)) throw invalid(`${field} must be a UUID`);
}

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}
