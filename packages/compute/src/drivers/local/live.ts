import type { ChildProcess } from "node:child_process";
import type { Logger } from "pino";
import {
  DELETE_AFTER_KEY,
  type FailureReason,
  type SandboxObservation,
  type SandboxSpec,
  SOFT_DELETE_GRACE_MS,
  type Usage,
} from "../../driver.ts";
import type { Cgroup } from "./cgroups.ts";
import type { ExecHelper } from "./exec-helper.ts";
import type { ExecTarget, RunningExec } from "./exec-run.ts";
import { ExecSlots } from "./exec-slots.ts";
import type { RootImage } from "./images/index.ts";
import { SandboxLayout } from "./sandbox-layout.ts";
import type { SessionWorkspace } from "./session-workspace.ts";
import type { UsageSources } from "./usage.ts";
import type { WarmPool } from "./warm-pool.ts";
import { WorkspaceFs } from "./workspace-fs.ts";
import type { WorkspaceImage } from "./workspace-image.ts";

/**
 * One sandbox the local driver runs (or ran, until it is destroyed): what is
 * on the host for it and where it is in its life. The driver's parts each
 * take the fields they use (a Pick of this), so what a part may touch is
 * written at its top.
 */
export interface Live extends UsageSources, ExecTarget {
  spec: SandboxSpec;
  layout: SandboxLayout;
  uid: number;
  cgroup: Cgroup;
  fs: WorkspaceFs;
  /** The session's workspace it mounts (none for a warm sandbox, or one made before workspaces were per session). */
  workspace?: SessionWorkspace;
  /** Its ext4 image, mounted at workspaceDir while the sandbox is not destroyed. */
  image?: WorkspaceImage;
  /** The host directory of the workspace: the image's mount point (layout.workspace without an image). */
  workspaceDir: string;
  observation: SandboxObservation;
  initPid?: number;
  child?: ChildProcess;
  /** Why we are stopping it ourselves, so the exit is reported right (shutdown: not at all, the next start finds it lost). */
  stopping?: "deadline" | "destroy" | "shutdown" | "release";
  deadlineTimer?: NodeJS.Timeout;
  livenessTimer?: NodeJS.Timeout;
  destroyed?: Usage;
  settledWaiters: Array<() => void>;
  execs: Set<RunningExec>;
  /** The exec cgroups, and the next one made ahead. */
  slots: ExecSlots;
  /** /proc/<initPid>/stat start time, so a reused pid is never entered. */
  initStartTime?: string;
  /** Time spent in pauses that ended; the deadline is createdAt + maxRuntimeMs + this. */
  pausedMs: number;
  /** While paused (frozen, or released): since when. */
  pausedAt?: number;
  /** Paused and its processes ended (memory given back): a resume starts it again on its workspace. */
  released?: boolean;
  releaseTimer?: NodeJS.Timeout;
  /** Started ahead and not yet adopted: no record, no deadline, no phase events. */
  warm?: boolean;
  oomKillsSeen: number;
  /** The image whose tree is its root (none: the host's /usr). */
  rootImage?: RootImage;
  /** The warm pool it was started in (warm sandboxes only). */
  warmPool?: WarmPool<Live>;
}

/** What a new Live is made with: where its directory and cgroup go, and who makes its exec slots. */
export interface LiveHome {
  dataDir: string;
  root: Cgroup;
  helper: ExecHelper;
}

/** A Live for spec, starting, nothing made on the host yet. */
export function newLive(home: LiveHome, spec: SandboxSpec, uid = sandboxUid(spec.sandboxId)): Live {
  const layout = new SandboxLayout(home.dataDir, spec.sandboxId);
  const live: Live = {
    spec,
    layout,
    uid,
    cgroup: home.root.child(spec.sandboxId),
    fs: undefined as unknown as WorkspaceFs,
    workspaceDir: layout.workspace,
    observation: { phase: "starting" },
    fileReadBytes: 0,
    fileWriteBytes: 0,
    memSampleSum: 0,
    memSamples: 0,
    settledWaiters: [],
    execs: new Set(),
    slots: undefined as unknown as ExecSlots,
    oomKillsSeen: 0,
    pausedMs: spec.pausedMs ?? 0,
  };
  live.slots = new ExecSlots(live, home.helper, () => live.observation.phase === "ready" && !live.stopping);
  return live;
}

/** A uid per sandbox, outside any range the host uses, so sandboxes cannot touch each other's files. */
export function sandboxUid(sandboxId: string): number {
  return 0x10000000 + (Number.parseInt(sandboxId.replace(/-/g, "").slice(0, 6), 16) || 1);
}

/** The file calls' view of live's workspace, as its uid. */
export function openFs(live: Pick<Live, "fs" | "workspaceDir" | "spec" | "uid">): void {
  live.fs = new WorkspaceFs(live.workspaceDir, live.spec.workspace.mountPath, { uid: live.uid, gid: live.uid });
}

/** How a sandbox ended, beside its delete-after: `failed:<reason>` (a destroyed one has no entry). */
export const ENDED_KEY = "compute.platform.io/ended";
const FAILURE_REASONS = new Set<FailureReason>(["exited", "deadline", "oom", "start_error", "lost"]);

/** The failure reason of a sandbox marked as failed, if it is. */
export function failedMark(annotations: Record<string, string> | undefined): FailureReason | undefined {
  const reason = annotations?.[ENDED_KEY]?.replace(/^failed:/, "") as FailureReason | undefined;
  return reason && FAILURE_REASONS.has(reason) ? reason : undefined;
}

/**
 * Records that a sandbox ended on its own (failed): why, its lifetime usage,
 * and a delete-after, so its directory and workspace are collected after
 * the grace like a destroyed one's instead of staying forever.
 */
export function markEnded(
  live: Pick<Live, "layout" | "finalUsage" | "spec">,
  reason: FailureReason,
  log: Logger | undefined,
): void {
  try {
    if (live.finalUsage) live.layout.writeUsage(live.finalUsage);
    live.layout.writeAnnotations({
      [DELETE_AFTER_KEY]: new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString(),
      [ENDED_KEY]: `failed:${reason}`,
    });
  } catch (err) {
    log?.warn({ err, sandboxId: live.spec.sandboxId }, "marking an ended sandbox for collection failed");
  }
}
