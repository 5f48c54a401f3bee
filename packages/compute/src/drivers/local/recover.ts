import type { Logger } from "pino";
import { DELETE_AFTER_KEY, type SandboxObservation, type SandboxSpec, zeroUsage } from "../../driver.ts";
import { LocalImages } from "./images/index.ts";
import type { Launcher } from "./launch.ts";
import { failedMark, type Live, markEnded } from "./live.ts";
import type { Pauser } from "./pause.ts";
import { processStartTime } from "./sandbox-layout.ts";
import type { SandboxNetwork } from "./sandbox-network.ts";
import { readCgroupBase } from "./spare-cgroup.ts";
import { currentUsage } from "./usage.ts";
import type { Workspaces } from "./workspaces.ts";

/** What recovering a sandbox needs of the rest of the driver. */
export interface RecoverDeps {
  newLive(spec: SandboxSpec): Live;
  /** The driver knows it by its id from now on. */
  register(live: Live): void;
  network?: Pick<SandboxNetwork, "setPolicy">;
  workspaces: Pick<Workspaces, "locate" | "release" | "mount" | "attachIo">;
  /** Sets live's phase, telling its waiters and the driver's listeners (phases.ts). */
  setPhase(live: Live, observation: SandboxObservation): void;
  launcher: Pick<Launcher<Live>, "armDeadline" | "onInitExit" | "createCgroup">;
  pauser: Pick<Pauser<Live>, "armRelease">;
  log?: Logger;
}

/**
 * A sandbox of the store found again when the service starts, from what its
 * directory and cgroup hold: still running (adopted, its end polled for),
 * paused (frozen, or released: a resume starts it again), ended while a
 * service watched it, destroyed, or lost (its processes gone).
 */
export async function recoverSandbox(deps: RecoverDeps, spec: SandboxSpec): Promise<SandboxObservation> {
  const live = deps.newLive(spec);
  live.rootImage = LocalImages.recorded(live.layout.dir);
  // Resumed into a spare launcher's cgroup before: its usage goes on from its earlier cgroups' counters.
  live.cgroupBase = readCgroupBase(live.layout, live.cgroup);
  deps.register(live);
  if (deps.network && spec.networkPolicy) deps.network.setPolicy(spec.sandboxId, spec.networkPolicy);
  const annotations = live.layout.readAnnotations();
  deps.workspaces.locate(live, annotations?.[DELETE_AFTER_KEY] === undefined);
  const failed = failedMark(annotations);
  if (failed) {
    // It ended while a service watched it, and the record missed that (a crash in between).
    live.finalUsage = live.layout.readUsage() ?? zeroUsage();
    deps.setPhase(live, { phase: "failed", reason: failed, message: "sandbox ended before the restart" });
    await deps.workspaces.release(live);
    return live.observation;
  }
  if (annotations?.[DELETE_AFTER_KEY]) {
    live.destroyed = live.layout.readUsage() ?? zeroUsage();
    live.finalUsage = live.destroyed;
    live.observation = { phase: "gone" };
    // A crash between marking and unmounting left it mounted.
    await deps.workspaces.release(live);
    return live.observation;
  }
  const state = live.layout.readState();
  // An adopted warm sandbox has the uid it was started with, not the one its id gives.
  if (state?.uid) live.uid = state.uid;
  if (state && processStartTime(state.initPid) === state.initStartTime && state.initStartTime !== "") {
    // Still running from before the restart: adopt it. Not our child, so poll for its end.
    // Its workspace stays mounted across a restart; mounted again if something unmounted it.
    if (live.image) await deps.workspaces.mount(live);
    live.workspace?.clearMark();
    deps.workspaces.attachIo(live, false);
    live.initPid = state.initPid;
    live.initStartTime = state.initStartTime;
    live.oomKillsSeen = live.cgroup.stats().oomKills;
    if (live.cgroup.isFrozen() && spec.pausedAt) {
      // Paused before the restart: it stays so (its max runtime not counting) until resumed, and is released
      // a full period after this start (when it was frozen is not recorded).
      live.pausedAt = spec.pausedAt.getTime();
      deps.setPhase(live, { phase: "paused" });
      deps.pauser.armRelease(live);
    } else {
      // Frozen while its record says running (a crash between the freeze and the record): it runs again.
      if (live.cgroup.isFrozen()) await live.cgroup.setFrozen(false);
      deps.setPhase(live, { phase: "ready" });
      deps.launcher.armDeadline(live);
    }
    live.livenessTimer = setInterval(() => {
      if (processStartTime(state.initPid) !== state.initStartTime) {
        clearInterval(live.livenessTimer);
        void deps.launcher.onInitExit(live, null, null);
      }
    }, 500);
    live.livenessTimer.unref();
    return live.observation;
  }
  if (spec.pausedAt) {
    // Paused, and its processes gone (released before the restart, or ended with the service): it stays
    // paused on its workspace, and a resume starts it again there.
    if (live.image) await deps.workspaces.mount(live);
    live.workspace?.clearMark();
    deps.workspaces.attachIo(live, false);
    await live.cgroup.killAll(2000);
    deps.launcher.createCgroup(live);
    live.oomKillsSeen = live.cgroup.stats().oomKills;
    live.pausedAt = spec.pausedAt.getTime();
    live.released = true;
    deps.setPhase(live, { phase: "paused" });
    return live.observation;
  }
  // Its processes are gone (host reboot, crash): the sandbox cannot be resumed.
  live.finalUsage = live.layout.readUsage() ?? currentUsage(live);
  await live.cgroup.killAll(2000);
  await live.cgroup.remove();
  markEnded(live, "lost", deps.log);
  deps.setPhase(live, {
    phase: "failed",
    reason: "lost",
    message: "sandbox processes not found after restart",
  });
  // Nothing runs on it any more (a killed service whose sandboxes died with
  // it left it mounted): its loop device goes; the image stays for the
  // session's next sandbox, mounted again should its files be asked for.
  await deps.workspaces.release(live);
  return live.observation;
}
