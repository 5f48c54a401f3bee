import { ComputeReason, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { SandboxObservation } from "../../driver.ts";
import type { KeyedLock } from "../../keyed-lock.ts";
import { launchExited } from "./launch.ts";
import type { Live } from "./live.ts";
import type { SandboxNetwork } from "./sandbox-network.ts";

/** What pausing, releasing and resuming touch of a sandbox. */
export type Pausable = Pick<
  Live,
  | "spec"
  | "observation"
  | "cgroup"
  | "slots"
  | "child"
  | "initPid"
  | "initStartTime"
  | "stopping"
  | "destroyed"
  | "deadlineTimer"
  | "livenessTimer"
  | "releaseTimer"
  | "pausedAt"
  | "pausedMs"
  | "released"
>;

/** What pausing needs of the rest of the driver. */
export interface PauseDeps<S extends Pausable> {
  /** One pause, resume or destroy of a sandbox at a time (shared with destroy). */
  ops: KeyedLock;
  /** The sandbox of an id; NOT_FOUND otherwise. */
  get(sandboxId: string): S;
  /** Sets live's phase, telling its waiters and the driver's listeners (phases.ts). */
  setPhase(live: S, observation: SandboxObservation): void;
  /** live's phase once it is no longer starting. */
  waitSettled(live: S, signal?: AbortSignal): Promise<SandboxObservation>;
  /** Arms live's max runtime with the pauses that ended left out (launch.ts). */
  armDeadline(live: S): void;
  /**
   * Starts a released sandbox's init again on its workspace and uid, in the
   * spare launcher's cgroup renamed into its place or its own (made again if
   * something removed it); UNAVAILABLE once the driver is closing, since
   * nothing would end it.
   */
  startAgain(live: S): void;
  /** Gets ready for a released sandbox's start (launch.ts's spare launcher); off any caller's path. */
  prepareStart?(): void;
  /** live's processes were ended: its cgroup's counters are final (spare-cgroup.ts keeps them). */
  released?(live: S): void;
  network?: Pick<SandboxNetwork, "stop">;
  /** How long a paused sandbox stays frozen before its processes are ended. */
  releaseAfterMs: number;
  log?: Logger;
}

/**
 * Pause, release and resume of a local sandbox. A pause freezes the
 * sandbox's cgroup, so a resume soon after is a thaw; after releaseAfterMs
 * its processes are ended and its memory given back, and a resume is then a
 * new start on the same workspace and uid, in a cgroup of the same name and
 * limits (the spare launcher's, renamed into its place: spare-cgroup.ts;
 * the counters of the one before carry on in its usage).
 */
export class Pauser<S extends Pausable> {
  constructor(private readonly deps: PauseDeps<S>) {}

  /**
   * Freezes the sandbox's cgroup (init, the exec child placed ahead, any
   * exec): its processes stop where they are and keep their memory, so a
   * resume is a thaw (no new process, no new mount). Where the kernel lets a
   * cgroup give memory back (v2 memory.reclaim) it is asked to. Its max
   * runtime stops counting; the workspace stays mounted.
   */
  pause(sandboxId: string): Promise<void> {
    return this.deps.ops.run(sandboxId, async () => {
      const live = this.deps.get(sandboxId);
      if (live.observation.phase === "paused") return;
      if (live.observation.phase !== "ready" || !live.initPid || live.stopping || live.destroyed) {
        throw PlatformError.failedPrecondition(
          `sandbox is ${live.stopping ? "stopping" : live.observation.phase}`,
          ComputeReason.sandboxNotRunnable,
        );
      }
      // The exec child being placed ahead joins the cgroup first (frozen mid-way it would hold the helper).
      await live.slots.ready();
      clearTimeout(live.deadlineTimer);
      live.pausedAt = Date.now();
      if (!(await live.cgroup.setFrozen(true))) {
        await live.cgroup.setFrozen(false);
        live.pausedAt = undefined;
        this.deps.armDeadline(live);
        throw PlatformError.internal("pausing the sandbox failed: its processes could not be frozen");
      }
      live.cgroup.reclaimMemory();
      this.deps.setPhase(live, { phase: "paused" });
      this.armRelease(live);
    });
  }

  /** After releaseAfterMs frozen, a paused sandbox's processes are ended and its memory given back. */
  armRelease(live: S): void {
    clearTimeout(live.releaseTimer);
    const id = live.spec.sandboxId;
    live.releaseTimer = setTimeout(() => {
      live.releaseTimer = undefined;
      this.deps.ops
        .run(id, () => this.release(live))
        .catch((err) => this.deps.log?.warn({ err, sandboxId: id }, "releasing a paused sandbox's memory failed"));
    }, this.deps.releaseAfterMs);
    live.releaseTimer.unref();
  }

  /**
   * Ends a paused sandbox's processes (detached ones included) and keeps
   * everything else: its workspace (mounted), its cgroup and counters, its
   * record PAUSED. What a frozen sandbox holds (about 0.9 MiB: three
   * processes and their namespaces) goes back to the machine.
   */
  private async release(live: S): Promise<void> {
    if (live.observation.phase !== "paused" || live.released || live.stopping || live.destroyed) return;
    live.stopping = "release";
    clearInterval(live.livenessTimer);
    try {
      await live.slots.discard();
      const child = live.child;
      await live.cgroup.killAll();
      await launchExited(child, 2000);
      live.child = undefined;
      live.initPid = undefined;
      live.initStartTime = undefined;
      live.released = true;
      try {
        this.deps.released?.(live);
      } catch (err) {
        this.deps.log?.warn({ err, sandboxId: live.spec.sandboxId }, "keeping a released sandbox's counters failed");
      }
      await this.deps.network?.stop(live.spec.sandboxId);
      live.cgroup.reclaimMemory();
      this.deps.prepareStart?.();
    } finally {
      live.stopping = undefined;
    }
  }

  /** Thaws a paused sandbox; its deadline is re-armed with the paused time left out. */
  resume(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    return this.deps.ops.run(sandboxId, async () => {
      signal?.throwIfAborted();
      const live = this.deps.get(sandboxId);
      if (live.observation.phase === "starting") return this.deps.waitSettled(live, signal);
      if (live.observation.phase === "ready") return { ...live.observation };
      if (live.observation.phase !== "paused" || live.stopping || live.destroyed) {
        throw PlatformError.failedPrecondition(
          `sandbox is ${live.stopping ? "stopping" : live.observation.phase}`,
          ComputeReason.sandboxNotRunnable,
        );
      }
      clearTimeout(live.releaseTimer);
      if (live.released) return this.restart(live, signal);
      if (!(await live.cgroup.setFrozen(false)))
        throw PlatformError.internal("resuming the sandbox failed: its processes could not be thawed");
      live.pausedMs += Math.max(0, Date.now() - (live.pausedAt ?? Date.now()));
      live.pausedAt = undefined;
      this.deps.armDeadline(live);
      this.deps.setPhase(live, { phase: "ready" });
      return { ...live.observation };
    });
  }

  /** Resumes a released sandbox: a new init on the same workspace and uid (cgroup: above); ready as a start is. */
  private async restart(live: S, signal?: AbortSignal): Promise<SandboxObservation> {
    live.pausedMs += Math.max(0, Date.now() - (live.pausedAt ?? Date.now()));
    live.pausedAt = undefined;
    live.released = false;
    // No phase event: the record stays PAUSED until the domain stores READY (or the start's failure).
    live.observation = { phase: "starting" };
    this.deps.startAgain(live);
    const settled = await this.deps.waitSettled(live, signal);
    if (settled.phase === "ready") this.deps.armDeadline(live);
    return settled;
  }
}
