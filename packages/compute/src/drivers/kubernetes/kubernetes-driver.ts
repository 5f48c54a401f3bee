// SandboxDriver on Kubernetes: a sandbox is a pod plus a PVC; commands and
// file operations run through pods/exec; destroy deletes the pod and marks
// the PVC with compute.platform.io/delete-after; collectGarbage deletes the
// PVCs whose mark has passed.
import { randomBytes } from "node:crypto";
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions, type V1Pod } from "@kubernetes/client-node";
import { ComputeReason, PlatformError } from "@platform/errors";
import {
  DELETE_AFTER_KEY,
  type ExecEvent,
  type ExecRequest,
  KILL_GRACE_MS,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  SOFT_DELETE_GRACE_MS,
  type Usage,
  zeroUsage,
} from "../../driver.ts";
import { Annotation, buildClaim, buildPod, CONTAINER, claimName, Label, observePod, type PodOptions, podName, SELECTOR } from "./objects.ts";
import { PodExec, type PodExecTarget } from "./pod-exec.ts";
import { cleanWorkspacePath } from "../../paths.ts";
import { workspaceSizeBytes } from "../../service/workspace-size.ts";
import { CONTAINER_USAGE, FILES, KILL, RUN } from "./scripts.ts";
import { UsageRecordFilter } from "./usage-record.ts";

export interface KubernetesDriverOptions extends Partial<PodOptions> {
  kubeConfig: KubeConfig;
  namespace: string;
  /** SIGTERM → SIGKILL grace on cancel (spec: 10 s). */
  killGraceMs?: number;
  /** How often pods are polled for phase changes. Default 1000 ms. */
  pollIntervalMs?: number;
}

const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

function apiCode(err: unknown): number | undefined {
  const c = (err as { code?: unknown })?.code;
  return typeof c === "number" ? c : undefined;
}

const notFound = (id: string) => PlatformError.notFound(`sandbox ${id} not found`, ComputeReason.sandboxNotFound);

interface Known {
  mountPath: string;
  last?: SandboxObservation;
  usage: Usage;
  destroyedUsage?: Usage;
}

function addUsage(a: Usage, b: Usage): Usage {
  return {
    cpuMs: a.cpuMs + b.cpuMs,
    memoryPeakBytes: Math.max(a.memoryPeakBytes, b.memoryPeakBytes),
    memoryAvgBytes: Math.max(a.memoryAvgBytes, b.memoryAvgBytes),
    diskReadBytes: a.diskReadBytes + b.diskReadBytes,
    diskWriteBytes: a.diskWriteBytes + b.diskWriteBytes,
    networkEgressBytes: a.networkEgressBytes + b.networkEgressBytes,
    networkIngressBytes: a.networkIngressBytes + b.networkIngressBytes,
  };
}

/**
 * The CONTAINER_USAGE script's output: cgroup CPU (µs), memory peak and
 * io.stat read/write bytes of the whole container. Undefined fields when the
 * cgroup is not visible from inside the pod.
 */
export function parseContainerUsage(text: string): Partial<Usage> {
  const section = (name: string) => (text.split(`#${name}\n`)[1] ?? "").split("\n#")[0].trim();
  const out: Partial<Usage> = {};
  const cpu = Number(section("cpu"));
  if (section("cpu") !== "" && Number.isFinite(cpu)) out.cpuMs = Math.round(cpu / 1000);
  const mem = Number(section("mem"));
  if (section("mem") !== "" && Number.isFinite(mem)) out.memoryPeakBytes = mem;
  const io = section("io");
  if (io !== "") {
    let read = 0;
    let write = 0;
    for (const m of io.matchAll(/\brbytes=(\d+)/g)) read += Number(m[1]);
    for (const m of io.matchAll(/\bwbytes=(\d+)/g)) write += Number(m[1]);
    out.diskReadBytes = read;
    out.diskWriteBytes = write;
  }
  return out;
}

export class KubernetesDriver implements SandboxDriver {
  readonly name = "kubernetes";
  private readonly core: CoreV1Api;
  private readonly kc: KubeConfig;
  private readonly namespace: string;
  private readonly pod: PodOptions;
  private readonly killGraceMs: number;
  private readonly pollMs: number;
  private readonly known = new Map<string, Known>();
  private readonly listeners = new Set<(id: string, o: SandboxObservation) => void>();
  private poller: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: KubernetesDriverOptions) {
    this.kc = options.kubeConfig;
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.namespace = options.namespace;
    this.killGraceMs = options.killGraceMs ?? KILL_GRACE_MS;
    this.pollMs = options.pollIntervalMs ?? 1000;
    this.pod = {
      runAsUser: options.runAsUser ?? 1000,
      defaultStorageClass: options.defaultStorageClass ?? "",
      defaultSize: options.defaultSize ?? "5Gi",
      tmpSize: options.tmpSize ?? "1Gi",
    };
  }

  // ---- lifecycle -----------------------------------------------------------

  async create(spec: SandboxSpec): Promise<void> {
    // The same rule as the domain's and the local driver's, before anything reaches the cluster.
    workspaceSizeBytes(spec.workspace.size || this.pod.defaultSize);
    this.known.set(spec.sandboxId, { mountPath: spec.workspace.mountPath, usage: zeroUsage() });
    try {
      await this.core.createNamespacedPersistentVolumeClaim({ namespace: this.namespace, body: buildClaim(spec, this.pod) });
      await this.core.createNamespacedPod({ namespace: this.namespace, body: buildPod(spec, this.pod) });
    } catch (err) {
      if (apiCode(err) === 409) throw PlatformError.alreadyExists(`sandbox ${spec.sandboxId} exists`);
      throw PlatformError.internal("pod or volume creation failed", err);
    }
    this.record(spec.sandboxId, { phase: "starting" });
    this.startPolling();
  }

  async recover(spec: SandboxSpec): Promise<SandboxObservation> {
    const k = this.known.get(spec.sandboxId) ?? { mountPath: spec.workspace.mountPath, usage: zeroUsage() };
    this.known.set(spec.sandboxId, k);
    const o = await this.observe(spec.sandboxId);
    this.startPolling();
    return o;
  }

  async observe(sandboxId: string): Promise<SandboxObservation> {
    const found = await this.readPod(sandboxId);
    // A destroyed sandbox's pod may still be terminating (graceful deletion):
    // it reads like no pod, and the claim's delete-after mark decides.
    const pod = found?.metadata?.deletionTimestamp ? undefined : found;
    if (pod) {
      const k = this.known.get(sandboxId);
      if (!k) this.known.set(sandboxId, { mountPath: pod.metadata?.annotations?.[Annotation.mountPath] ?? "/workspace", usage: zeroUsage() });
      return this.record(sandboxId, observePod(pod));
    }
    // No pod: destroyed (the claim carries the delete-after mark), vanished, or unknown.
    const claim = await this.core.readNamespacedPersistentVolumeClaim({ name: claimName(sandboxId), namespace: this.namespace }).catch((err) => {
      if (apiCode(err) === 404) return undefined;
      throw PlatformError.internal("orchestrator call failed", err);
    });
    const k = this.known.get(sandboxId);
    if (claim?.metadata?.annotations?.[DELETE_AFTER_KEY] || k?.destroyedUsage) return this.record(sandboxId, { phase: "gone" });
    if (claim || k) return this.record(sandboxId, { phase: "failed", reason: "lost", message: "the sandbox pod is missing" });
    throw notFound(sandboxId);
  }

  async waitSettled(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    for (;;) {
      signal?.throwIfAborted();
      const o = await this.observe(sandboxId);
      if (o.phase !== "starting") return o;
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, Math.min(this.pollMs, 100));
        signal?.addEventListener(
          "abort",
          () => {
            clearTimeout(t);
            reject(signal.reason);
          },
          { once: true },
        );
      });
    }
  }

  onPhaseChange(listener: (sandboxId: string, observation: SandboxObservation) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Cumulative usage: the sum of this process's exec records, raised to the
   * container cgroup's own counters when the pod runs and exposes them (they
   * also cover work done before a restart of the compute service).
   */
  async usage(sandboxId: string): Promise<Usage> {
    const k = this.known.get(sandboxId);
    if (k?.destroyedUsage) return k.destroyedUsage;
    const o = await this.observe(sandboxId);
    const base = { ...(this.known.get(sandboxId)?.usage ?? zeroUsage()) };
    if (o.phase !== "ready") return base;
    try {
      const r = await PodExec.run(this.kc, this.target(sandboxId), ["/bin/sh", "-c", CONTAINER_USAGE]);
      const c = parseContainerUsage(r.stdout.toString("utf8"));
      for (const key of ["cpuMs", "memoryPeakBytes", "diskReadBytes", "diskWriteBytes"] as const) {
        const v = c[key];
        if (v !== undefined && v > base[key]) base[key] = v;
      }
    } catch {
      // Counters from the exec records only.
    }
    return base;
  }

  async destroy(sandboxId: string): Promise<Usage> {
    const k = this.known.get(sandboxId);
    if (k?.destroyedUsage) return k.destroyedUsage;
    const claim = await this.core.readNamespacedPersistentVolumeClaim({ name: claimName(sandboxId), namespace: this.namespace }).catch((err) => {
      if (apiCode(err) === 404) return undefined;
      throw PlatformError.internal("orchestrator call failed", err);
    });
    const recorded = claim?.metadata?.annotations?.[Annotation.usage];
    if (claim?.metadata?.annotations?.[DELETE_AFTER_KEY] && recorded) {
      const u = { ...zeroUsage(), ...JSON.parse(recorded) } as Usage;
      this.known.set(sandboxId, { mountPath: k?.mountPath ?? "/workspace", usage: u, destroyedUsage: u });
      return u;
    }
    const pod = await this.readPod(sandboxId);
    if (!pod && !claim && !k) throw notFound(sandboxId);
    const total = pod ? await this.usage(sandboxId).catch(() => k?.usage ?? zeroUsage()) : (k?.usage ?? zeroUsage());
    if (pod) {
      await this.core.deleteNamespacedPod({ name: podName(sandboxId), namespace: this.namespace, gracePeriodSeconds: 1 }).catch((err) => {
        if (apiCode(err) !== 404) throw PlatformError.internal("orchestrator call failed", err);
      });
    }
    if (claim) {
      const deleteAfter = new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString();
      await this.core
        .patchNamespacedPersistentVolumeClaim(
          { name: claimName(sandboxId), namespace: this.namespace, body: { metadata: { annotations: { [DELETE_AFTER_KEY]: deleteAfter, [Annotation.usage]: JSON.stringify(total) } } } },
          merge,
        )
        .catch((err) => {
          throw PlatformError.internal("orchestrator call failed", err);
        });
    }
    this.known.set(sandboxId, { mountPath: k?.mountPath ?? "/workspace", usage: total, destroyedUsage: total });
    this.record(sandboxId, { phase: "gone" });
    return total;
  }

  async collectGarbage(now = new Date()): Promise<string[]> {
    const claims = await this.core.listNamespacedPersistentVolumeClaim({ namespace: this.namespace, labelSelector: SELECTOR }).catch((err) => {
      throw PlatformError.internal("orchestrator call failed", err);
    });
    const removed: string[] = [];
    for (const c of claims.items) {
      const after = Date.parse(c.metadata?.annotations?.[DELETE_AFTER_KEY] ?? "");
      const id = c.metadata?.labels?.[Label.sandboxId];
      // Only claims carrying a parsable mark that has passed; never a live sandbox's.
      if (!id || Number.isNaN(after) || after > now.getTime()) continue;
      await this.core.deleteNamespacedPersistentVolumeClaim({ name: c.metadata?.name ?? "", namespace: this.namespace }).then(
        () => {
          removed.push(id);
          this.known.delete(id);
        },
        (err) => {
          if (apiCode(err) !== 404) throw PlatformError.internal("orchestrator call failed", err);
        },
      );
    }
    return removed;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.poller) clearInterval(this.poller);
    this.poller = undefined;
  }

  // ---- exec ----------------------------------------------------------------

  async *exec(sandboxId: string, request: ExecRequest): AsyncIterable<ExecEvent> {
    if (request.signal?.aborted) {
      await this.requireReady(sandboxId);
      yield { type: "completed", exitCode: -1, wallTimeMs: 0, cancelled: true, usage: zeroUsage() };
      return;
    }
    await this.requireReady(sandboxId);
    const id = randomBytes(8).toString("hex");
    const env = Object.entries(request.env).map(([k, v]) => `${k}=${v}`);
    const command = ["/bin/sh", "-c", RUN, "sh", id, request.workingDir, String(env.length), ...env, request.command, ...request.args];
    const started = Date.now();
    const run = await PodExec.start(this.kc, this.target(sandboxId), command);
    let cancelled = false;
    const onAbort = () => {
      cancelled = true;
      this.cancel(sandboxId, id, run).catch(() => {});
    };
    request.signal?.addEventListener("abort", onAbort, { once: true });
    let drained = false;
    const records = new UsageRecordFilter(id);
    try {
      for await (const chunk of run.chunks()) {
        if (chunk.type === "stdout") {
          yield chunk;
          continue;
        }
        const data = records.push(chunk.data);
        if (data.length > 0) yield { type: "stderr", data: new Uint8Array(data) };
      }
      const rest = records.flush();
      if (rest.length > 0) yield { type: "stderr", data: new Uint8Array(rest) };
      drained = true;
    } finally {
      request.signal?.removeEventListener("abort", onAbort);
      // A consumer that stops reading early must not leave the command running in the pod.
      if (!drained && !cancelled) this.cancel(sandboxId, id, run).catch(() => {});
    }
    const wallTimeMs = Date.now() - started;
    const { oomKills, ...usage } = records.record ?? { ...zeroUsage(), oomKills: 0 };
    const k = this.known.get(sandboxId);
    if (k) k.usage = addUsage(k.usage, usage);
    let oomKilled = oomKills > 0 && run.exitCode === 137 ? true : undefined;
    if (!oomKilled && !cancelled && run.exitCode === 137) {
      // The container itself was OOM-killed (its PID 1 went with it).
      const o = await this.observe(sandboxId).catch(() => undefined);
      if (o?.reason === "oom") oomKilled = true;
    }
    yield {
      type: "completed",
      exitCode: cancelled ? -1 : (run.exitCode ?? -1),
      wallTimeMs,
      cancelled,
      usage,
      ...(oomKilled ? { oomKilled } : {}),
    };
  }

  /** SIGTERM to the exec's session, SIGKILL after the grace if it still runs. */
  private async cancel(sandboxId: string, id: string, run: PodExec): Promise<void> {
    const target = this.target(sandboxId);
    await PodExec.run(this.kc, target, ["/bin/sh", "-c", KILL, "sh", id, "TERM"]);
    const ended = await Promise.race([run.finished.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), this.killGraceMs).unref())]);
    if (!ended) await PodExec.run(this.kc, target, ["/bin/sh", "-c", KILL, "sh", id, "KILL"]);
  }

  // ---- files ---------------------------------------------------------------

  async readFile(sandboxId: string, path: string, offset: number, maxBytes: number): Promise<ReadResult> {
    const r = await this.files(sandboxId, ["read", path, String(offset), String(maxBytes)]);
    const nl = r.indexOf(0x0a);
    const totalSize = Number(r.subarray(0, nl).toString("utf8"));
    const data = new Uint8Array(r.subarray(nl + 1));
    return { data, totalSize, eof: Math.min(offset, totalSize) + data.length >= totalSize };
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array, append: boolean, mode: number): Promise<number> {
    await this.files(sandboxId, ["write", path, append ? "1" : "0", (mode & 0o7777).toString(8)], data);
    return data.length;
  }

  async listFiles(sandboxId: string, path: string, recursive: boolean, maxEntries: number): Promise<ListResult> {
    const out = await this.files(sandboxId, ["list", path, recursive ? "1" : "0", String(maxEntries)]);
    const fields = out.toString("utf8").split("\0");
    const entries = [];
    for (let i = 0; i + 4 < fields.length; i += 5) {
      const isDir = fields[i + 2] === "d";
      entries.push({
        path: fields[i],
        size: isDir ? 0 : Number(fields[i + 1]),
        isDir,
        mode: Number.parseInt(fields[i + 3], 8) & 0o7777,
        modifiedAt: new Date(Math.round(Number(fields[i + 4]) * 1000)),
      });
    }
    return { entries: entries.slice(0, maxEntries), truncated: entries.length > maxEntries };
  }

  private async files(sandboxId: string, args: string[], stdin?: Uint8Array): Promise<Buffer> {
    await this.requireReady(sandboxId);
    const mount = this.known.get(sandboxId)?.mountPath ?? "/workspace";
    const [op, raw, ...rest] = args;
    // Rule 1 again (the domain cleaned already): the same function as every driver.
    const rel = cleanWorkspacePath(raw, mount);
    const r = await PodExec.run(this.kc, this.target(sandboxId), ["/bin/sh", "-c", FILES, "sh", op, mount, rel, ...rest], stdin ?? (op === "write" ? new Uint8Array() : undefined));
    switch (r.exitCode) {
      case 0:
        return r.stdout;
      case 2:
        throw PlatformError.notFound(`${rel || "/"} does not exist`);
      case 13:
        throw PlatformError.permissionDenied(`${rel} resolves outside the workspace`, ComputeReason.symlinkOutside);
      case 20:
        throw PlatformError.invalidArgument(`${rel} is not a directory`);
      case 21:
        throw PlatformError.invalidArgument(`${rel || "/"} is a directory`);
      default:
        throw PlatformError.internal("exec I/O transport failure", new Error(`${op} exited ${r.exitCode}: ${r.stderr.toString("utf8").slice(0, 500)}`));
    }
  }

  // ---- helpers -------------------------------------------------------------

  private target(sandboxId: string): PodExecTarget {
    return { namespace: this.namespace, pod: podName(sandboxId), container: CONTAINER };
  }

  private async readPod(sandboxId: string): Promise<V1Pod | undefined> {
    try {
      return await this.core.readNamespacedPod({ name: podName(sandboxId), namespace: this.namespace });
    } catch (err) {
      if (apiCode(err) === 404) return undefined;
      throw PlatformError.internal("orchestrator call failed", err);
    }
  }

  private async requireReady(sandboxId: string): Promise<void> {
    const o = await this.observe(sandboxId);
    if (o.phase !== "ready") throw PlatformError.failedPrecondition(`sandbox is ${o.phase}`, ComputeReason.sandboxNotRunnable);
  }

  /** Stores the observation and tells listeners when the phase (or failure reason) changed. */
  private record(sandboxId: string, o: SandboxObservation): SandboxObservation {
    const k = this.known.get(sandboxId);
    if (!k) return o;
    const changed = k.last?.phase !== o.phase || k.last?.reason !== o.reason;
    k.last = o;
    if (changed) for (const l of this.listeners) l(sandboxId, o);
    return o;
  }

  /** Lists sandbox pods on an interval so phase changes (deadline, OOM, vanished pods) are announced. */
  private startPolling(): void {
    if (this.poller || this.closed) return;
    this.poller = setInterval(() => {
      this.pollOnce().catch(() => {});
    }, this.pollMs);
    this.poller.unref();
  }

  private async pollOnce(): Promise<void> {
    const live = [...this.known.entries()].filter(([, k]) => !k.destroyedUsage && k.last?.phase !== "failed");
    if (live.length === 0) return;
    const pods = await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: SELECTOR });
    const byId = new Map(pods.items.map((p) => [p.metadata?.labels?.[Label.sandboxId] ?? "", p]));
    for (const [id] of live) {
      const pod = byId.get(id);
      if (pod && !pod.metadata?.deletionTimestamp) this.record(id, observePod(pod));
      else await this.observe(id).catch(() => {});
    }
  }
}
