import * as fs from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { DELETE_AFTER_KEY, SOFT_DELETE_GRACE_MS } from "../../driver.ts";
import type { Cgroup } from "./cgroups.ts";
import { collectExpired, expiredWorkspaces } from "./gc.ts";
import { ENDED_KEY, type Live } from "./live.ts";
import { processStartTime, SandboxLayout, writeJson } from "./sandbox-layout.ts";
import { RETIRED_CGROUP_PREFIX, SPARE_CGROUP_PREFIX } from "./spare-cgroup.ts";
import { deleteAfterOf } from "./session-workspace.ts";
import { removeStaleSocketDirs } from "./socket-dir.ts";
import { releaseImages, releaseOrphanedMounts } from "./workspace-image.ts";
import type { Workspaces } from "./workspaces.ts";

/** An empty cgroup no sandbox of this data directory claims is removed at start after this long. */
const ABANDONED_CGROUP_MS = 10 * 60_000;

/** What the housekeeping needs of the rest of the driver. */
export interface HousekeepingDeps {
  dataDir: string;
  /** The driver's cgroup, whose children are the sandboxes'. */
  root: Cgroup;
  /** The sandbox of an id this driver knows, if it knows it. */
  sandbox(sandboxId: string): Pick<Live, "observation" | "released"> | undefined;
  /** Whether a spare launcher's cgroup is this process's, still in use (launch.ts). */
  ownsCgroup(name: string): boolean;
  workspaces: Pick<Workspaces, "withLock" | "users">;
  /** Removes the image trees no name and no sandbox holds any more (their warm pools first). */
  collectImages(): Promise<void>;
  log?: Logger;
}

/**
 * What is left on the host by sandboxes no service watches any more, and
 * what has outlived its grace: expired workspaces and sandbox directories
 * (GC), directories and workspaces nobody marked (reconcile), cgroups,
 * workspace mounts and exec socket directories of killed services, and the
 * processes of launches lost track of before the exit.
 */
export class Housekeeping {
  constructor(private readonly deps: HousekeepingDeps) {}

  async collectGarbage(now = new Date()): Promise<string[]> {
    await this.releaseOrphans();
    this.removeEndedCgroups();
    // Image trees no name and no sandbox holds any more (a name re-imported while a sandbox ran on the old tree).
    try {
      await this.deps.collectImages();
    } catch (err) {
      this.deps.log?.warn({ err }, "removing unused image trees failed");
    }
    const removed: string[] = [];
    for (const found of expiredWorkspaces(this.deps.dataDir, now)) {
      const key = found.workspaceKey;
      // A session's workspace under its lock: a create taking it up again waits, or goes first and clears the mark.
      const gone = key
        ? await this.deps.workspaces.withLock(
            key,
            async () => this.deps.workspaces.users(key) === 0 && collectExpired(found.dir, now),
          )
        : await collectExpired(found.dir, now);
      if (gone) removed.push(found.name);
    }
    return removed;
  }

  /**
   * After the domain recovered every sandbox its store holds as live: any
   * other sandbox directory without a delete-after (its record ended while
   * no service watched it, or its recovery failed) is ended and marked
   * `lost`, and any session workspace no sandbox of this driver uses is
   * marked too, so GC collects them after the grace instead of never.
   * Returns the directories marked.
   */
  async reconcile(): Promise<string[]> {
    const marked: string[] = [];
    const when = new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString();
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.deps.dataDir, "sandboxes")).filter((n) => !n.startsWith("."));
    } catch {}
    for (const name of names) {
      const layout = new SandboxLayout(this.deps.dataDir, name);
      const phase = this.deps.sandbox(name)?.observation.phase;
      if (phase === "starting" || phase === "ready" || phase === "paused") continue;
      const annotations = layout.readAnnotations();
      if (annotations?.[DELETE_AFTER_KEY]) continue;
      try {
        const cgroup = this.deps.root.child(name);
        await cgroup.killAll(2000);
        await cgroup.remove();
        await releaseImages(layout.image);
        layout.writeAnnotations({
          ...annotations,
          [DELETE_AFTER_KEY]: when,
          [ENDED_KEY]: annotations?.[ENDED_KEY] ?? "failed:lost",
        });
        marked.push(layout.dir);
      } catch (err) {
        this.deps.log?.warn({ err, sandboxId: name }, "marking an unreachable sandbox directory for collection failed");
      }
    }
    let keys: string[] = [];
    try {
      keys = fs.readdirSync(join(this.deps.dataDir, "workspaces"));
    } catch {}
    for (const key of keys) {
      await this.deps.workspaces.withLock(key, async () => {
        const dir = join(this.deps.dataDir, "workspaces", key);
        if (this.deps.workspaces.users(key) > 0 || deleteAfterOf(dir)) return;
        try {
          writeJson(join(dir, "annotations.json"), { [DELETE_AFTER_KEY]: when });
          marked.push(dir);
        } catch (err) {
          this.deps.log?.warn({ err, workspace: key }, "marking an unused workspace for collection failed");
        }
      });
    }
    if (marked.length > 0)
      this.deps.log?.warn(
        { marked },
        "sandboxes and workspaces no live sandbox uses were left unmarked; marked for collection",
      );
    return marked;
  }

  /**
   * A create that was provisioning when close() began, or a launch this
   * process lost track of, can leave processes in a cgroup of one of this
   * data directory's sandboxes that no Live ends. They would outlive the
   * service (the launch chain has no parent-death signal of bwrap's own
   * until bwrap runs), so every such cgroup is emptied before the exit.
   */
  async killUnwatched(): Promise<void> {
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.deps.dataDir, "sandboxes"));
    } catch {
      return;
    }
    for (const name of names) {
      const cgroup = this.deps.root.child(name);
      if (cgroup.isEmpty()) continue;
      this.deps.log?.warn({ sandboxId: name }, "ending the processes of a sandbox no longer watched before the exit");
      await cgroup.killAll(2000);
      cgroup.removeTreeSync();
    }
  }

  /**
   * Removes the cgroups of sandboxes that ended while no service of ours
   * watched them (killed with their service, or stopped before this fix):
   * empty ones whose sandbox has ended (its init no longer runs, or it is
   * marked for collection), or that have been empty for 10 minutes without a
   * sandbox here to claim them. A sandbox being made now (no state yet) and
   * any cgroup holding a process are left alone. Empty spare launcher
   * cgroups and retired sandbox cgroups (spare-cgroup.ts) go too: a killed
   * service's at once (its spare ends with it), another running service's
   * only when it is gone or after the same 10 minutes.
   */
  removeEndedCgroups(): void {
    const removed: string[] = [];
    for (const name of this.deps.root.childNames()) {
      const cgroup = this.deps.root.child(name);
      // cgroup.procs, not pids.current: that still counts the zombies of a sandbox killed with its service.
      if (cgroup.pids().length > 0) continue;
      if (name.startsWith(SPARE_CGROUP_PREFIX) || name.startsWith(RETIRED_CGROUP_PREFIX)) {
        if (!this.deps.ownsCgroup(name) && (!madeByOther(name) || cgroup.ageMs() > ABANDONED_CGROUP_MS))
          if (cgroup.removeTreeSync()) removed.push(name);
        continue;
      }
      // Released (paused, no processes): its cgroup keeps its counters for the resume.
      if (this.deps.sandbox(name)?.released) continue;
      const layout = new SandboxLayout(this.deps.dataDir, name);
      const state = layout.readState();
      const ended =
        (state !== undefined && processStartTime(state.initPid) !== state.initStartTime) ||
        layout.readAnnotations()?.[DELETE_AFTER_KEY] !== undefined ||
        cgroup.ageMs() > ABANDONED_CGROUP_MS;
      if (ended && cgroup.removeTreeSync()) removed.push(name);
    }
    if (removed.length > 0)
      this.deps.log?.info(
        { removed: removed.length },
        "removed the cgroups of sandboxes that ended while no service watched them",
      );
  }

  /** Removes the exec socket directories killed services left in the temp directory. */
  removeStaleSocketDirs(): void {
    try {
      const removed = removeStaleSocketDirs();
      if (removed.length > 0) this.deps.log?.info({ removed }, "removed exec socket directories of killed services");
    } catch (err) {
      this.deps.log?.warn({ err }, "looking for stale exec socket directories failed");
    }
  }

  /** Workspace mounts a killed service (this or another data directory) left behind: released, logged. */
  async releaseOrphans(): Promise<void> {
    try {
      const released = await releaseOrphanedMounts();
      if (released.length > 0) this.deps.log?.info({ released }, "released workspace mounts nobody will use again");
    } catch (err) {
      this.deps.log?.warn({ err }, "looking for orphaned workspace mounts failed");
    }
  }
}

/**
 * Whether a spare or retired cgroup's name (`<prefix>...-<pid>-<n>`) names
 * another process that runs: a service beside this one on the same cgroup
 * prefix, whose spare may be empty for a moment while it is moved in.
 */
function madeByOther(name: string): boolean {
  const pid = Number(/-(\d+)-\d+$/.exec(name)?.[1]);
  if (!pid || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
