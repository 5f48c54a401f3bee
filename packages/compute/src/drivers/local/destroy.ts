import { DELETE_AFTER_KEY, type SandboxObservation, SOFT_DELETE_GRACE_MS, type Usage } from "../../driver.ts";
import { launchExited } from "./launch.ts";
import type { Live } from "./live.ts";
import type { SandboxNetwork } from "./sandbox-network.ts";
import { currentUsage, type UsageSources, withNetwork, workspaceIo } from "./usage.ts";
import type { WorkspaceHolder, Workspaces } from "./workspaces.ts";

/** What ending a sandbox touches of it. */
export type Endable = WorkspaceHolder &
  UsageSources &
  Pick<Live, "child" | "slots" | "deadlineTimer" | "releaseTimer" | "livenessTimer" | "settledWaiters" | "warm" | "fs">;

/** What ending a sandbox needs of the rest of the driver. */
export interface EndDeps {
  network?: Pick<SandboxNetwork, "counters" | "forget">;
  workspaces: Pick<Workspaces, "flushIo" | "release">;
  /** Sets live's phase, telling its waiters and the driver's listeners (phases.ts). */
  setPhase(live: Endable, observation: SandboxObservation): void;
}

/**
 * Destroys a sandbox: its processes and cgroup end, its lifetime usage is
 * taken (buffered writes flushed first) and recorded with a delete-after,
 * its workspace released. Returns that usage; a destroyed sandbox's again.
 */
export async function destroySandbox(deps: EndDeps, live: Endable): Promise<Usage> {
  const sandboxId = live.spec.sandboxId;
  if (live.destroyed) return live.destroyed;
  // A sandbox that failed before has its totals already (taken at its failure, flushed).
  const running =
    live.observation.phase === "ready" || live.observation.phase === "starting" || live.observation.phase === "paused";
  live.stopping = "destroy";
  clearTimeout(live.deadlineTimer);
  clearTimeout(live.releaseTimer);
  clearInterval(live.livenessTimer);
  const usageBefore = live.finalUsage ?? currentUsage(live);
  await live.cgroup.killAll();
  await launchExited(live.child, 2000);
  const total = withNetwork(live.finalUsage ?? usageBefore, deps.network?.counters(sandboxId));
  await deps.network?.forget(sandboxId);
  if (running && live.io) {
    // Its buffered writes count too: flushed before the last reading (its exit's usage was taken without).
    await deps.workspaces.flushIo(live);
    const disk = workspaceIo(live);
    if (disk) {
      total.diskReadBytes = disk.read;
      total.diskWriteBytes = disk.write;
    }
  }
  live.destroyed = total;
  live.finalUsage = total;
  live.layout.writeUsage(total);
  live.layout.writeAnnotations({ [DELETE_AFTER_KEY]: new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString() });
  // The image stays for the session's next sandbox, or for the grace window
  // (GC deletes it); its mount and loop device go now unless another sandbox of the session uses it.
  await deps.workspaces.release(live);
  // A spare exec cgroup still being made would keep the sandbox's from being removed.
  await live.slots.settle();
  await live.cgroup.remove();
  deps.setPhase(live, { phase: "gone" });
  return total;
}

/** Ends a sandbox because the service stops and it is not to outlive it. */
export async function endWithService(deps: EndDeps, live: Endable): Promise<void> {
  if (!live.destroyed) {
    live.stopping ??= "shutdown";
    await live.cgroup.killAll(2000);
    await live.cgroup.remove();
  }
  await deps.workspaces.release(live);
}
