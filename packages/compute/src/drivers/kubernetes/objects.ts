// The pod and PVC of one sandbox, and how a pod's status reads as a phase.
import { createHash } from "node:crypto";
import type { V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import type { SandboxObservation, SandboxSpec } from "../../driver.ts";
import { isUuid } from "@platform/errors";
import { sharedProxyEnv } from "../../egress/credentials.ts";

export const CONTAINER = "sandbox";
export const MANAGED_BY = "compute";
export const Label = {
  managedBy: "app.kubernetes.io/managed-by",
  component: "app.kubernetes.io/component",
  sandboxId: "compute.platform.io/sandbox-id",
  /** On a pod: which session workspace (claim) it mounts, hashed to fit a label value. */
  workspace: "compute.platform.io/workspace",
} as const;
export const Annotation = {
  /** The spec's literal annotation key. */
  tenantId: "tenant_id",
  sessionId: "compute.platform.io/session-id",
  mountPath: "compute.platform.io/mount-path",
  createdAt: "compute.platform.io/created-at",
  /** Lifetime usage recorded at destroy, so a repeated destroy answers the same. */
  usage: "compute.platform.io/usage",
} as const;
/**
 * On a session's claim, one per destroyed sandbox of the session: its
 * lifetime usage (JSON), so DescribeSandbox and a repeated DestroySandbox
 * answer the same after its pod is gone.
 */
export const destroyedKey = (sandboxId: string) => `sandbox.compute.platform.io/${sandboxId}`;
export const DESTROYED_PREFIX = "sandbox.compute.platform.io/";
/**
 * On a session's claim, one per paused sandbox of the session (its pod
 * deleted): since when. The claim counts as in use while one is there, so
 * neither a destroy of another sandbox nor GC takes the workspace away.
 */
export const pausedKey = (sandboxId: string) => `paused.compute.platform.io/${sandboxId}`;
export const PAUSED_PREFIX = "paused.compute.platform.io/";
export const SELECTOR = `${Label.managedBy}=${MANAGED_BY},${Label.component}=sandbox`;

export const podName = (sandboxId: string) => `sbx-${sandboxId}`;

/**
 * The PVC of a session's workspace (tenant_id + session_id): every sandbox of
 * the session mounts it, so its files outlive each pod. `ws-<tenant>-<session>`
 * for the UUIDs the domain passes, a hash otherwise.
 */
export function claimName(tenantId: string, sessionId: string): string {
  const t = tenantId.toLowerCase();
  const s = sessionId.toLowerCase();
  if (isUuid(t) && isUuid(s)) return `ws-${t}-${s}`;
  return `ws-h-${createHash("sha256").update(`${tenantId}\0${sessionId}`).digest("hex").slice(0, 40)}`;
}

/** The workspace label value of a claim (label values are at most 63 characters). */
export const workspaceLabel = (claim: string) => createHash("sha256").update(claim).digest("hex").slice(0, 40);

export interface PodOptions {
  /** UID/GID the sandbox runs as (restricted Pod Security needs non-root). */
  runAsUser: number;
  defaultStorageClass: string;
  defaultSize: string;
  /** Size limit of the /tmp emptyDir. */
  tmpSize: string;
  /**
   * The egress proxy (issue 21): every pod gets its variables with the
   * sandbox's own credential; only a sandbox with a policy also gets the
   * NetworkPolicy that lets it reach the proxy (egress-policy.ts).
   */
  egress?: { address: string; key: Buffer };
}

function proxyVariables(sandboxId: string, o: PodOptions): { name: string; value: string }[] {
  if (!o.egress) return [];
  const i = o.egress.address.lastIndexOf(":");
  const env = sharedProxyEnv(
    o.egress.address.slice(0, i),
    Number(o.egress.address.slice(i + 1)),
    sandboxId,
    o.egress.key,
  );
  return Object.entries(env).map(([name, value]) => ({ name, value }));
}

function labels(spec: SandboxSpec): Record<string, string> {
  return { [Label.managedBy]: MANAGED_BY, [Label.component]: "sandbox", [Label.sandboxId]: spec.sandboxId };
}

export function buildClaim(spec: SandboxSpec, o: PodOptions): V1PersistentVolumeClaim {
  const storageClass = spec.workspace.storageClass || o.defaultStorageClass;
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: claimName(spec.tenantId, spec.sessionId),
      labels: { [Label.managedBy]: MANAGED_BY, [Label.component]: "sandbox" },
      annotations: { [Annotation.tenantId]: spec.tenantId, [Annotation.sessionId]: spec.sessionId },
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      // Unset means the cluster's default class.
      storageClassName: storageClass || undefined,
      resources: { requests: { storage: spec.workspace.size || o.defaultSize } },
    },
  };
}

export function buildPod(spec: SandboxSpec, o: PodOptions, now = new Date()): V1Pod {
  // max_runtime counts running time: the time spent paused (no pod) is left out.
  const remainingMs = spec.createdAt.getTime() + spec.limits.maxRuntimeMs + (spec.pausedMs ?? 0) - now.getTime();
  const resources = { cpu: `${spec.limits.cpuMillis}m`, memory: String(spec.limits.memoryBytes) };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: podName(spec.sandboxId),
      labels: { ...labels(spec), [Label.workspace]: workspaceLabel(claimName(spec.tenantId, spec.sessionId)) },
      annotations: {
        [Annotation.tenantId]: spec.tenantId,
        [Annotation.sessionId]: spec.sessionId,
        [Annotation.mountPath]: spec.workspace.mountPath,
        [Annotation.createdAt]: spec.createdAt.toISOString(),
      },
    },
    spec: {
      restartPolicy: "Never",
      // The hard limit on running time, counted from the sandbox's creation without its pauses.
      activeDeadlineSeconds: Math.max(1, Math.ceil(remainingMs / 1000)),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: o.runAsUser,
        runAsGroup: o.runAsUser,
        fsGroup: o.runAsUser,
        seccompProfile: { type: "RuntimeDefault" },
      },
      containers: [
        {
          name: CONTAINER,
          image: spec.image,
          // PID 1 only keeps the pod alive; commands arrive through exec.
          command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"],
          workingDir: spec.workspace.mountPath,
          env: [{ name: "HOME", value: "/tmp" }, ...proxyVariables(spec.sandboxId, o)],
          resources: { requests: resources, limits: resources },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            capabilities: { drop: ["ALL"] },
          },
          volumeMounts: [
            { name: "workspace", mountPath: spec.workspace.mountPath },
            { name: "tmp", mountPath: "/tmp" },
          ],
        },
      ],
      volumes: [
        { name: "workspace", persistentVolumeClaim: { claimName: claimName(spec.tenantId, spec.sessionId) } },
        { name: "tmp", emptyDir: { sizeLimit: o.tmpSize } },
      ],
    },
  };
}

// Waiting reasons that will not resolve by themselves.
const FATAL_WAITING = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);

/** Reads the pod status the way the spec's state table needs it. */
export function observePod(pod: V1Pod): SandboxObservation {
  const status = pod.status ?? {};
  const cs = status.containerStatuses?.find((c) => c.name === CONTAINER);
  const term = cs?.state?.terminated ?? cs?.lastState?.terminated;
  if (pod.metadata?.deletionTimestamp) return { phase: "failed", reason: "lost", message: "pod is being deleted" };
  if (status.reason === "DeadlineExceeded")
    return { phase: "failed", reason: "deadline", exitCode: term?.exitCode, message: status.message };
  if (term?.reason === "OOMKilled")
    return { phase: "failed", reason: "oom", exitCode: term.exitCode, message: "container OOMKilled" };
  switch (status.phase) {
    case "Running":
      if (cs?.state?.running) return { phase: "ready" };
      if (term) return { phase: "failed", reason: "exited", exitCode: term.exitCode, message: term.reason };
      return { phase: "starting" };
    case "Succeeded":
    case "Failed":
      return { phase: "failed", reason: "exited", exitCode: term?.exitCode, message: status.reason ?? term?.reason };
    default: {
      const waiting = cs?.state?.waiting;
      if (waiting?.reason && FATAL_WAITING.has(waiting.reason))
        return { phase: "failed", reason: "start_error", message: `${waiting.reason}: ${waiting.message ?? ""}` };
      return { phase: "starting" };
    }
  }
}
