// SandboxDriver on Kubernetes: a sandbox is a pod plus its session's PVC
// (one per tenant_id + session_id, mounted by every sandbox of the session);
// commands and file operations run through pods/exec; destroy deletes the pod
// and, when no other pod of the session runs, marks the PVC with
// compute.platform.io/delete-after (as does a pod that failed); the session's
// next sandbox clears the mark; collectGarbage deletes the PVCs whose mark has
// passed.
import { randomBytes } from "node:crypto";
import {
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import { ComputeReason, PlatformError } from "@platform/errors";
import type { NetworkPolicy } from "@platform/network-policy";
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
import { KeyedLock } from "../../keyed-lock.ts";
import { cleanWorkspacePath } from "../../paths.ts";
import { workspaceSizeBytes } from "../../service/workspace-size.ts";
import { buildEgressPolicy, egressPolicyName } from "./egress-policy.ts";
import {
  Annotation,
  buildClaim,
  buildPod,
  CONTAINER,
  claimName,
  DESTROYED_PREFIX,
  destroyedKey,
  Label,
  observePod,
  PAUSED_PREFIX,
  type PodOptions,
  pausedKey,
  podName,
  SELECTOR,
  workspaceLabel,
} from "./objects.ts";
import { PodExec, type PodExecTarget } from "./pod-exec.ts";
import { CONTAINER_USAGE, FILES, KILL, RUN } from "./scripts.ts";
import { UsageRecordFilter } from "./usage-record.ts";

export interface KubernetesDriverOptions extends Partial<PodOptions> {
  kubeConfig: KubeConfig;
  namespace: string;
  /** SIGTERM → SIGKILL grace on cancel (spec: 10 s). */
  killGraceMs?: number;
  /** How often pods are polled for phase changes. Default 1000 ms. */
  pollIntervalMs?: number;
  /**
   * The egress proxy's Service (`host:port`) and the key of the sandboxes'
   * proxy credentials (issue 21). Absent: no sandbox network (the driver has
   * no setNetworkPolicy, so a policy is FAILED_PRECONDITION).
   */
  egress?: { address: string; key: Buffer };
  /**
   * The bytes the egress proxy relayed for a sandbox (its recorded
   * connections: compute's network events, which the proxy writes), added to
   * its usage. Absent: network usage stays 0.
   */
  networkTotals?: (sandboxId: string) => Promise<{ egressBytes: number; ingressBytes: number }>;
}

const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
/** How long a create waits for the session's collected claim to finish terminating. */
const CLAIM_TERMINATION_WAIT_MS = 60_000;

function apiCode(err: unknown): number | undefined {
  const c = (err as { code?: unknown })?.code;
  return typeof c === "number" ? c : undefined;
}

const notFound = (id: string) => PlatformError.notFound(`sandbox ${id} not found`, ComputeReason.sandboxNotFound);

interface Known {
  mountPath: string;
  /** The session's claim; unknown for a sandbox seen only through a pod of another process. */
  claim?: string;
  last?: SandboxObservation;
  usage: Usage;
  destroyedUsage?: Usage;
  /** What a new pod is made from (resume); known for sandboxes created or recovered here. */
  spec?: SandboxSpec;
  /** While paused (no pod): since when. */
  pausedAt?: number;
  /**
   * Between create's start and its pod's creation: no pod yet is not a lost
   * pod (the poller, listing then, would announce the new sandbox failed and
   * mark its session's claim for collection).
   */
  creating?: boolean;
  /** Lifetime usage when the last pod went (pause): a new pod's counters start at 0 and add to it. */
  carried?: Usage;
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

/** The claim a pod mounts as its workspace. */
function claimOfPod(pod: V1Pod): string | undefined {
  return pod.spec?.volumes?.find((v) => v.name === "workspace")?.persistentVolumeClaim?.claimName;
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
  private readonly net: NetworkingV1Api;
  private readonly networkTotals?: KubernetesDriverOptions["networkTotals"];
  private readonly kc: KubeConfig;
  private readonly namespace: string;
  private readonly pod: PodOptions;
  private readonly killGraceMs: number;
  private readonly pollMs: number;
  private readonly known = new Map<string, Known>();
  private readonly listeners = new Set<(id: string, o: SandboxObservation) => void>();
  private poller: NodeJS.Timeout | undefined;
  private closed = false;
  /** Pause, resume and destroy of one sandbox run one at a time (a resume's new pod never outlives a destroy). */
  private readonly ops = new KeyedLock();
  /**
   * A session's claim is unmarked and given its new pod, or checked for other
   * users and marked, one at a time: a release that had found no other pod
   * must not mark the claim after a create has cleared the mark and before
   * that create's pod can be seen (the new sandbox's workspace would be
   * collected under it).
   */
  private readonly claims = new KeyedLock();

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
      ...(options.egress ? { egress: options.egress } : {}),
    };
    this.net = options.kubeConfig.makeApiClient(NetworkingV1Api);
    this.networkTotals = options.networkTotals;
    if (options.egress) this.setNetworkPolicy = (id, policy) => this.applyNetworkPolicy(id, policy);
  }

  /**
   * Replaces a sandbox's policy: the egress proxy reads the policy itself
   * from compute's records on each connection (the domain stores it), so
   * here only the sandbox's NetworkPolicy follows: made when it has a policy
   * (its one way out, to the proxy), deleted when it has none (no way out).
   */
  setNetworkPolicy?: (sandboxId: string, policy: NetworkPolicy | undefined) => Promise<void>;

  private async applyNetworkPolicy(sandboxId: string, policy: NetworkPolicy | undefined): Promise<void> {
    const k = this.known.get(sandboxId);
    if (k?.spec) k.spec = { ...k.spec, networkPolicy: policy };
    if (policy) await this.ensureEgressPolicy(sandboxId);
    else await this.deleteEgressPolicy(sandboxId);
  }

  private async ensureEgressPolicy(sandboxId: string): Promise<void> {
    await this.net
      .createNamespacedNetworkPolicy({ namespace: this.namespace, body: buildEgressPolicy(sandboxId) })
      .catch((err) => {
        if (apiCode(err) !== 409) throw PlatformError.internal("network policy creation failed", err);
      });
  }

  private async deleteEgressPolicy(sandboxId: string): Promise<void> {
    await this.net
      .deleteNamespacedNetworkPolicy({ name: egressPolicyName(sandboxId), namespace: this.namespace })
      .catch((err) => {
        if (apiCode(err) !== 404) throw PlatformError.internal("orchestrator call failed", err);
      });
  }

  // ---- lifecycle -----------------------------------------------------------

  async create(spec: SandboxSpec): Promise<void> {
    // The same rule as the domain's and the local driver's, before anything reaches the cluster.
    workspaceSizeBytes(spec.workspace.size || this.pod.defaultSize);
    const claim = claimName(spec.tenantId, spec.sessionId);
    const known: Known = { mountPath: spec.workspace.mountPath, claim, usage: zeroUsage(), spec, creating: true };
    this.known.set(spec.sandboxId, known);
    try {
      // Its way out exists before its pod does (without it the pod reaches nothing; the order only avoids a first refusal).
      if (spec.networkPolicy && this.pod.egress) await this.ensureEgressPolicy(spec.sandboxId);
      await this.claims.run(claim, async () => {
        await this.ensureClaim(spec, claim);
        await this.core.createNamespacedPod({ namespace: this.namespace, body: buildPod(spec, this.pod) });
      });
    } catch (err) {
      // Not left behind by a sandbox that was never made (on 409 the sandbox exists and the policy is its own).
      if (spec.networkPolicy && this.pod.egress && apiCode(err) !== 409)
        await this.deleteEgressPolicy(spec.sandboxId).catch(() => {});
      if (err instanceof PlatformError) throw err;
      if (apiCode(err) === 409) throw PlatformError.alreadyExists(`sandbox ${spec.sandboxId} exists`);
      throw PlatformError.internal("pod or volume creation failed", err);
    } finally {
      known.creating = undefined;
    }
    this.record(spec.sandboxId, { phase: "starting" });
    this.startPolling();
  }

  async recover(spec: SandboxSpec): Promise<SandboxObservation> {
    const k = this.known.get(spec.sandboxId) ?? {
      mountPath: spec.workspace.mountPath,
      claim: claimName(spec.tenantId, spec.sessionId),
      usage: zeroUsage(),
    };
    k.spec = spec;
    // Paused before the restart: its pod is gone on purpose, its claim keeps the files.
    if (spec.pausedAt) k.pausedAt = spec.pausedAt.getTime();
    this.known.set(spec.sandboxId, k);
    const o = await this.observe(spec.sandboxId);
    this.startPolling();
    return o;
  }

  async observe(sandboxId: string): Promise<SandboxObservation> {
    // Paused: no pod on purpose (one still there is being deleted).
    if (this.known.get(sandboxId)?.pausedAt !== undefined) return this.record(sandboxId, { phase: "paused" });
    const creating = this.known.get(sandboxId)?.creating;
    const found = await this.readPod(sandboxId);
    // A destroyed sandbox's pod may still be terminating (graceful deletion):
    // it reads like no pod, and the claim's delete-after mark decides.
    const pod = found?.metadata?.deletionTimestamp ? undefined : found;
    if (pod) {
      const k = this.known.get(sandboxId);
      const mountPath = pod.metadata?.annotations?.[Annotation.mountPath] ?? "/workspace";
      // The claim the pod really mounts (a pod made before claims were per session has its own).
      const claim = claimOfPod(pod);
      if (!k) this.known.set(sandboxId, { mountPath, claim, usage: zeroUsage() });
      else if (claim) k.claim = claim;
      return this.record(sandboxId, observePod(pod));
    }
    // Read before the pod was made by a create still in progress: not lost.
    if (creating) return { phase: "starting" };
    // No pod: destroyed (its session's claim records it), vanished, or unknown.
    const claim = await this.claimOf(sandboxId);
    const k = this.known.get(sandboxId);
    if (claim?.metadata?.annotations?.[destroyedKey(sandboxId)] || k?.destroyedUsage)
      return this.record(sandboxId, { phase: "gone" });
    if (k) return this.record(sandboxId, { phase: "failed", reason: "lost", message: "the sandbox pod is missing" });
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
    const carried = this.known.get(sandboxId)?.carried;
    const keys = ["cpuMs", "memoryPeakBytes", "diskReadBytes", "diskWriteBytes"] as const;
    if (carried) for (const key of keys) if (carried[key] > base[key]) base[key] = carried[key];
    const net = await this.networkTotals?.(sandboxId).catch(() => undefined);
    if (net) {
      base.networkEgressBytes = Math.max(base.networkEgressBytes, net.egressBytes);
      base.networkIngressBytes = Math.max(base.networkIngressBytes, net.ingressBytes);
    }
    if (o.phase !== "ready") return base;
    try {
      const r = await PodExec.run(this.kc, this.target(sandboxId), ["/bin/sh", "-c", CONTAINER_USAGE]);
      const c = parseContainerUsage(r.stdout.toString("utf8"));
      for (const key of keys) {
        const counted = c[key];
        if (counted === undefined) continue;
        // The pod's own counters start at its start: earlier pods' totals are carried (a peak is the larger one).
        const v = key === "memoryPeakBytes" ? Math.max(counted, carried?.[key] ?? 0) : counted + (carried?.[key] ?? 0);
        if (v > base[key]) base[key] = v;
      }
    } catch {
      // Counters from the exec records only.
    }
    return base;
  }

  /**
   * Scales the sandbox away: its lifetime usage so far is kept, its claim
   * marked as used by a paused sandbox (so it is neither marked for
   * collection nor collected), and its pod deleted. Processes, including
   * ones a command left in the background, end with the pod.
   */
  pause(sandboxId: string): Promise<void> {
    return this.ops.run(sandboxId, async () => {
      const k = this.known.get(sandboxId);
      if (k?.pausedAt !== undefined) return;
      const o = await this.observe(sandboxId);
      if (o.phase !== "ready" || !k || k.destroyedUsage)
        throw PlatformError.failedPrecondition(`sandbox is ${o.phase}`, ComputeReason.sandboxNotRunnable);
      if (!k.spec)
        throw PlatformError.failedPrecondition(
          "sandbox was not created or recovered by this service",
          ComputeReason.sandboxNotRunnable,
        );
      k.carried = await this.usage(sandboxId).catch(() => k.usage);
      const claim = k.claim ?? (await this.claimOf(sandboxId))?.metadata?.name;
      if (claim) await this.patchClaim(claim, { [pausedKey(sandboxId)]: new Date().toISOString() });
      k.pausedAt = Date.now();
      await this.core
        .deleteNamespacedPod({ name: podName(sandboxId), namespace: this.namespace, gracePeriodSeconds: 1 })
        .catch((err) => {
          if (apiCode(err) === 404) return;
          k.pausedAt = undefined;
          throw PlatformError.internal("orchestrator call failed", err);
        });
      this.record(sandboxId, { phase: "paused" });
    });
  }

  /**
   * A new pod for the sandbox, mounting the same claim (the files the paused
   * one left), with the paused time left out of its deadline; resolves once
   * it is settled. The old pod may still be terminating: its name is free
   * once it is gone.
   */
  resume(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    return this.ops.run(sandboxId, async () => {
      signal?.throwIfAborted();
      const k = this.known.get(sandboxId);
      if (!k || k.destroyedUsage || k.pausedAt === undefined) {
        const o = await this.observe(sandboxId);
        if (o.phase === "starting" || o.phase === "ready") return this.waitSettled(sandboxId, signal);
        throw PlatformError.failedPrecondition(`sandbox is ${o.phase}`, ComputeReason.sandboxNotRunnable);
      }
      if (!k.spec) throw PlatformError.internal("resuming the sandbox failed: its spec is unknown");
      const spec: SandboxSpec = {
        ...k.spec,
        pausedMs: (k.spec.pausedMs ?? 0) + Math.max(0, Date.now() - k.pausedAt),
        pausedAt: undefined,
      };
      for (;;) {
        signal?.throwIfAborted();
        const made = await this.core
          .createNamespacedPod({ namespace: this.namespace, body: buildPod(spec, this.pod) })
          .then(
            () => true,
            (err) => {
              if (apiCode(err) !== 409) throw PlatformError.internal("pod creation failed", err);
              return false;
            },
          );
        if (made) break;
        await new Promise((r) => setTimeout(r, Math.min(this.pollMs, 100)));
      }
      k.spec = spec;
      k.pausedAt = undefined;
      if (k.claim) await this.patchClaim(k.claim, { [pausedKey(sandboxId)]: null });
      this.record(sandboxId, { phase: "starting" });
      this.startPolling();
      return this.waitSettled(sandboxId, signal);
    });
  }

  private async patchClaim(name: string, annotations: Record<string, string | null>): Promise<void> {
    await this.core
      .patchNamespacedPersistentVolumeClaim(
        { name, namespace: this.namespace, body: { metadata: { annotations } } },
        merge,
      )
      .catch((err) => {
        throw PlatformError.internal("orchestrator call failed", err);
      });
  }

  destroy(sandboxId: string): Promise<Usage> {
    // After a pause or resume in flight: a resume racing a destroy either makes its pod first (then deleted here) or finds it destroyed.
    return this.ops.run(sandboxId, () => this.destroyNow(sandboxId));
  }

  private async destroyNow(sandboxId: string): Promise<Usage> {
    const k = this.known.get(sandboxId);
    if (k?.destroyedUsage) return k.destroyedUsage;
    const pod = await this.readPod(sandboxId);
    const name = (pod && claimOfPod(pod)) ?? k?.claim;
    const claim = name ? await this.readClaim(name) : await this.claimOf(sandboxId);
    const recorded = claim?.metadata?.annotations?.[destroyedKey(sandboxId)];
    if (recorded) {
      const u = { ...zeroUsage(), ...JSON.parse(recorded) } as Usage;
      this.known.set(sandboxId, {
        mountPath: k?.mountPath ?? "/workspace",
        claim: claim?.metadata?.name,
        usage: u,
        destroyedUsage: u,
      });
      return u;
    }
    if (!pod && !claim && !k) throw notFound(sandboxId);
    // A paused one's usage is what its pods left (carried), read without a pod.
    const total =
      pod || k?.pausedAt !== undefined
        ? await this.usage(sandboxId).catch(() => k?.usage ?? zeroUsage())
        : (k?.usage ?? zeroUsage());
    if (pod) {
      await this.core
        .deleteNamespacedPod({ name: podName(sandboxId), namespace: this.namespace, gracePeriodSeconds: 1 })
        .catch((err) => {
          if (apiCode(err) !== 404) throw PlatformError.internal("orchestrator call failed", err);
        });
    }
    // After the pod: a pod still terminating keeps its way out to its last byte, never a wider one.
    if (this.pod.egress) await this.deleteEgressPolicy(sandboxId);
    if (claim?.metadata?.name) {
      const annotations: Record<string, string | null> = {
        [destroyedKey(sandboxId)]: JSON.stringify(total),
        [pausedKey(sandboxId)]: null,
      };
      const name = claim.metadata.name;
      await this.claims.run(name, async () => {
        // Marked only when no other sandbox of the session still uses it.
        if (!(await this.claimInUse(name, sandboxId)))
          annotations[DELETE_AFTER_KEY] = new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString();
        await this.patchClaim(name, annotations);
      });
    }
    this.known.set(sandboxId, {
      mountPath: k?.mountPath ?? "/workspace",
      claim: claim?.metadata?.name,
      usage: total,
      destroyedUsage: total,
    });
    this.record(sandboxId, { phase: "gone" });
    return total;
  }

  async collectGarbage(now = new Date()): Promise<string[]> {
    const claims = await this.core
      .listNamespacedPersistentVolumeClaim({ namespace: this.namespace, labelSelector: SELECTOR })
      .catch((err) => {
        throw PlatformError.internal("orchestrator call failed", err);
      });
    const removed: string[] = [];
    for (const c of claims.items) {
      const annotations = c.metadata?.annotations ?? {};
      const after = Date.parse(annotations[DELETE_AFTER_KEY] ?? "");
      const name = c.metadata?.name ?? "";
      // Only claims carrying a parsable mark that has passed; never one a sandbox of the session uses.
      if (!name || Number.isNaN(after) || after > now.getTime()) continue;
      if (await this.claimInUse(name)) continue;
      // Its session's sandboxes: the one of a claim made before claims were per session is its label.
      const ids = Object.keys(annotations)
        .filter((key) => key.startsWith(DESTROYED_PREFIX))
        .map((key) => key.slice(DESTROYED_PREFIX.length));
      const legacy = c.metadata?.labels?.[Label.sandboxId];
      if (legacy && !ids.includes(legacy)) ids.push(legacy);
      await this.core.deleteNamespacedPersistentVolumeClaim({ name, namespace: this.namespace }).then(
        () => {
          removed.push(`session:${name}`, ...ids);
          for (const id of ids) this.known.delete(id);
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
    const command = [
      "/bin/sh",
      "-c",
      RUN,
      "sh",
      id,
      request.workingDir,
      String(env.length),
      ...env,
      request.command,
      ...request.args,
    ];
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
    // A TERM that could not be delivered (the exec call failed) still ends in the KILL after the grace.
    await PodExec.run(this.kc, target, ["/bin/sh", "-c", KILL, "sh", id, "TERM"]).catch(() => undefined);
    const ended = await Promise.race([
      run.finished.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), this.killGraceMs).unref()),
    ]);
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
    const r = await PodExec.run(
      this.kc,
      this.target(sandboxId),
      ["/bin/sh", "-c", FILES, "sh", op, mount, rel, ...rest],
      stdin ?? (op === "write" ? new Uint8Array() : undefined),
    );
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
        throw PlatformError.internal(
          "exec I/O transport failure",
          new Error(`${op} exited ${r.exitCode}: ${r.stderr.toString("utf8").slice(0, 500)}`),
        );
    }
  }

  // ---- helpers -------------------------------------------------------------

  private target(sandboxId: string): PodExecTarget {
    return { namespace: this.namespace, pod: podName(sandboxId), container: CONTAINER };
  }

  /**
   * The session's claim, made or reused. A claim collected a moment ago may
   * still be terminating (PVC protection holds it while the last pod goes): a
   * pod made now would wait for it forever, so wait until it is gone and make
   * a new one.
   */
  private async ensureClaim(spec: SandboxSpec, claim: string): Promise<void> {
    const deadline = Date.now() + CLAIM_TERMINATION_WAIT_MS;
    for (;;) {
      const made = await this.core
        .createNamespacedPersistentVolumeClaim({ namespace: this.namespace, body: buildClaim(spec, this.pod) })
        .then(
          () => true,
          (err) => {
            if (apiCode(err) !== 409) throw err;
            return false;
          },
        );
      if (made) return;
      const existing = await this.readClaim(claim);
      if (!existing) continue;
      if (!existing.metadata?.deletionTimestamp) {
        // The session had a sandbox: its claim (and files) is reused, no longer to be collected.
        await this.core.patchNamespacedPersistentVolumeClaim(
          { name: claim, namespace: this.namespace, body: { metadata: { annotations: { [DELETE_AFTER_KEY]: null } } } },
          merge,
        );
        return;
      }
      if (Date.now() > deadline)
        throw PlatformError.unavailable(`the session's previous workspace ${claim} is still being deleted`);
      await new Promise((r) => setTimeout(r, Math.min(this.pollMs, 200)));
    }
  }

  private async readClaim(name: string) {
    return this.core.readNamespacedPersistentVolumeClaim({ name, namespace: this.namespace }).catch((err) => {
      if (apiCode(err) === 404) return undefined;
      throw PlatformError.internal("orchestrator call failed", err);
    });
  }

  /** The claim of a sandbox's session: known here, or found by the record its destroy left on it (after a restart). */
  private async claimOf(sandboxId: string) {
    const name = this.known.get(sandboxId)?.claim;
    if (name) return this.readClaim(name);
    const claims = await this.core
      .listNamespacedPersistentVolumeClaim({ namespace: this.namespace, labelSelector: SELECTOR })
      .catch((err) => {
        throw PlatformError.internal("orchestrator call failed", err);
      });
    return claims.items.find((c) => c.metadata?.annotations?.[destroyedKey(sandboxId)] !== undefined);
  }

  /** Whether a pod other than `except`'s, not failed or being deleted, mounts the claim, or another sandbox of it is paused. */
  private async claimInUse(claim: string, exceptSandboxId?: string): Promise<boolean> {
    const annotations = (await this.readClaim(claim))?.metadata?.annotations ?? {};
    const except = exceptSandboxId ? pausedKey(exceptSandboxId) : undefined;
    if (Object.keys(annotations).some((key) => key.startsWith(PAUSED_PREFIX) && key !== except)) return true;
    const pods = await this.core
      .listNamespacedPod({
        namespace: this.namespace,
        labelSelector: `${SELECTOR},${Label.workspace}=${workspaceLabel(claim)}`,
      })
      .catch((err) => {
        throw PlatformError.internal("orchestrator call failed", err);
      });
    return pods.items.some((p) => {
      if (p.metadata?.name === (exceptSandboxId ? podName(exceptSandboxId) : undefined)) return false;
      const phase = observePod(p).phase;
      return phase === "starting" || phase === "ready";
    });
  }

  /** A sandbox failed: its session's claim is marked for collection unless another sandbox of the session uses it. */
  private async releaseClaimOf(sandboxId: string): Promise<void> {
    const name = this.known.get(sandboxId)?.claim;
    if (!name) return;
    await this.claims.run(name, async () => {
      const claim = await this.readClaim(name);
      if (!claim || claim.metadata?.annotations?.[DELETE_AFTER_KEY] || (await this.claimInUse(name, sandboxId))) return;
      const deleteAfter = new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString();
      await this.core.patchNamespacedPersistentVolumeClaim(
        { name, namespace: this.namespace, body: { metadata: { annotations: { [DELETE_AFTER_KEY]: deleteAfter } } } },
        merge,
      );
    });
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
    if (o.phase !== "ready")
      throw PlatformError.failedPrecondition(`sandbox is ${o.phase}`, ComputeReason.sandboxNotRunnable);
  }

  /** Stores the observation and tells listeners when the phase (or failure reason) changed. */
  private record(sandboxId: string, o: SandboxObservation): SandboxObservation {
    const k = this.known.get(sandboxId);
    if (!k) return o;
    const changed = k.last?.phase !== o.phase || k.last?.reason !== o.reason;
    const failedNow = o.phase === "failed" && k.last?.phase !== "failed";
    k.last = o;
    if (changed) for (const l of this.listeners) l(sandboxId, o);
    // Nothing of it runs any more: its session's workspace waits for the next sandbox, within the grace.
    if (failedNow) void this.releaseClaimOf(sandboxId).catch(() => {});
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
    const live = [...this.known.entries()].filter(
      ([, k]) => !k.destroyedUsage && !k.creating && k.last?.phase !== "failed",
    );
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
