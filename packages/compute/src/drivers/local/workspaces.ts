import * as fs from "node:fs";
import type { Logger } from "pino";
import { SOFT_DELETE_GRACE_MS } from "../../driver.ts";
import { KeyedLock } from "../../keyed-lock.ts";
import type { Live } from "./live.ts";
import { mountPointsUnder } from "./mount-table.ts";
import type { SandboxLayout } from "./sandbox-layout.ts";
import { SessionWorkspace } from "./session-workspace.ts";
import { MOUNTS_ROOT, releaseImages, WorkspaceImage } from "./workspace-image.ts";
import { flushWorkspace, WorkspaceIo } from "./workspace-io.ts";

/** What the workspace work touches of a sandbox. */
export type WorkspaceHolder = Pick<
  Live,
  | "spec"
  | "layout"
  | "uid"
  | "workspace"
  | "image"
  | "workspaceDir"
  | "io"
  | "ioBase"
  | "destroyed"
  | "stopping"
  | "observation"
>;

export interface WorkspacesOptions {
  dataDir: string;
  /** Loop devices are detached when this process ends (tests: a killed run leaves none). */
  dieWithService?: boolean;
  /** Every sandbox of the driver, to count who uses a workspace. */
  sandboxes: () => Iterable<WorkspaceHolder>;
  log?: Logger;
}

/**
 * The sandboxes' workspaces on the host: where a sandbox's is, its image
 * made, mounted and unmounted, who uses a session's, its mark for
 * collection once nobody does, and its disk counters. The work on one
 * session's workspace (create, release, GC) runs one at a time.
 */
export class Workspaces {
  /** Per session workspace key: the tail of the work on it (create, release, GC), so they never interleave. */
  private readonly locks = new KeyedLock();

  constructor(private readonly options: WorkspacesOptions) {}

  /**
   * Where live's workspace is: the session's; or, for a sandbox made before
   * workspaces were per session, the image in its own directory, moved to
   * the session's place when the session has none yet (a rename: the mount
   * and loop device follow the inode) unless it was destroyed.
   */
  locate(live: WorkspaceHolder, migrate: boolean): void {
    const ws = new SessionWorkspace(this.options.dataDir, live.spec.tenantId, live.spec.sessionId);
    const legacy = new WorkspaceImage(live.layout.image);
    if (legacy.exists() && migrate && !ws.exists()) {
      ws.prepare(live.layout.readState()?.uid ?? live.uid);
      fs.renameSync(legacy.file, ws.image);
    }
    // Without any image: made before workspace sizes were enforced, a plain directory.
    const image = legacy.exists() ? legacy : ws.exists() ? new WorkspaceImage(ws.image) : undefined;
    if (!image) return;
    if (image.file === ws.image) live.workspace = ws;
    live.image = image;
    live.workspaceDir = image.mountPoint();
  }

  /** Runs fn after every earlier holder of the session workspace's lock (create, release, GC of it). */
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.locks.run(key, fn);
  }

  /** Sandboxes of this driver that use the workspace now (starting or ready), but `except`. */
  users(key: string, except?: WorkspaceHolder): number {
    let n = 0;
    for (const l of this.options.sandboxes()) {
      // One we are stopping (destroy, deadline, shutdown) no longer counts.
      if (l === except || l.workspace?.key !== key || l.destroyed || l.stopping) continue;
      if (l.observation.phase === "starting" || l.observation.phase === "ready" || l.observation.phase === "paused")
        n++;
    }
    return n;
  }

  /**
   * live no longer uses its workspace: when no other sandbox of the session
   * does, it is unmounted (its loop device goes) and marked for collection
   * after the grace, unless marked already. The image stays for the
   * session's next sandbox, which clears the mark.
   */
  release(live: WorkspaceHolder): Promise<void> {
    const ws = live.workspace;
    if (!ws) return this.unmount(live);
    return this.withLock(ws.key, () => this.releaseLocked(live));
  }

  /** release, for a caller holding the workspace's lock already. */
  async releaseLocked(live: WorkspaceHolder): Promise<void> {
    const ws = live.workspace;
    if (ws && this.users(ws.key, live) > 0) return;
    if (ws) this.markIfUnused(ws);
    await this.unmount(live);
  }

  markIfUnused(ws: SessionWorkspace): void {
    if (this.users(ws.key) > 0 || ws.deleteAfter()) return;
    try {
      ws.markDeleteAfter(new Date(Date.now() + SOFT_DELETE_GRACE_MS));
    } catch (err) {
      this.options.log?.warn({ err, workspace: ws.key }, "marking an unused workspace for collection failed");
    }
  }

  /** Deletes a workspace that never served a sandbox (its image unmounted and detached first). */
  async removeDir(dir: string): Promise<void> {
    try {
      await releaseImages(dir);
      if (mountPointsUnder(dir).length === 0) await fs.promises.rm(dir, { recursive: true, force: true });
    } catch (err) {
      this.options.log?.warn({ err, dir }, "a workspace directory could not be removed");
    }
  }

  /**
   * Deletes a sandbox directory that will never be used again, its
   * workspace image unmounted and its loop device detached first.
   */
  async removeSandboxDir(layout: SandboxLayout): Promise<void> {
    try {
      await releaseImages(layout.dir);
    } catch (err) {
      // Nothing is mounted under the data directory, so the directory still goes; a
      // mount of a deleted image is released by the next sweep (releaseOrphanedMounts).
      this.options.log?.warn({ err, dir: layout.dir }, "a workspace image could not be unmounted");
    }
    try {
      if (mountPointsUnder(layout.dir).length > 0) throw new Error("something is mounted under it");
      await fs.promises.rm(layout.dir, { recursive: true, force: true });
    } catch (err) {
      this.options.log?.warn({ err, dir: layout.dir }, "a sandbox directory could not be removed");
    }
  }

  /** A new workspace image of sizeBytes at file for live, owned by its uid, mounted at its workspace directory. */
  async provision(live: WorkspaceHolder, file: string, sizeBytes: number): Promise<void> {
    const image = new WorkspaceImage(file);
    live.workspaceDir = await image.create(
      sizeBytes,
      { uid: live.uid, gid: live.uid },
      { endsWithProcess: this.options.dieWithService },
    );
    live.image = image;
  }

  /** Mounts image (a session's existing workspace); returns where. */
  mountImage(image: WorkspaceImage): Promise<string> {
    return image.mount({ endsWithProcess: this.options.dieWithService });
  }

  /** Mounts live's workspace image if it is not mounted (after a restart, or unmounted by hand). */
  async mount(live: WorkspaceHolder): Promise<void> {
    const image = live.image as WorkspaceImage;
    if (!image.exists()) throw new Error(`workspace image ${image.file} is missing`);
    live.workspaceDir = await this.mountImage(image);
  }

  /**
   * Finds the disk counters of live's workspace. fresh: the sandbox starts
   * now, its usage counts from here; otherwise (re-attached after a restart)
   * from the values recorded when it started, if the device is the same.
   */
  attachIo(live: WorkspaceHolder, fresh: boolean): void {
    const io = live.image ? WorkspaceIo.of(live.image.file, live.workspaceDir) : undefined;
    const now = io?.read();
    if (!io || !now) return;
    const saved = fresh ? undefined : live.layout.readIoBase();
    live.io = io;
    if (saved && saved.device === io.device && saved.read <= now.read && saved.write <= now.write) {
      live.ioBase = { read: saved.read, write: saved.write };
      return;
    }
    live.ioBase = now;
    try {
      live.layout.writeIoBase({ device: io.device, ...now });
    } catch (err) {
      this.options.log?.warn({ err, sandboxId: live.spec.sandboxId }, "recording the workspace's disk counters failed");
    }
  }

  /** Flushes live's workspace so its counters include buffered writes; logged, not thrown. */
  async flushIo(live: WorkspaceHolder): Promise<void> {
    if (!live.io || !workspaceMounted(live.workspaceDir)) return;
    try {
      await flushWorkspace(live.workspaceDir);
    } catch (err) {
      this.options.log?.warn(
        { err, sandboxId: live.spec.sandboxId },
        "flushing a workspace for its disk counters failed",
      );
    }
  }

  /** Unmounts live's workspace (its image stays); logged, not thrown: GC retries. */
  private async unmount(live: WorkspaceHolder): Promise<void> {
    if (!live.image) return;
    try {
      await live.image.unmount();
    } catch (err) {
      this.options.log?.warn({ err, sandboxId: live.spec.sandboxId }, "unmounting a workspace failed; GC will retry");
    }
  }
}

/** Whether a workspace image is mounted at dir (a mount point under MOUNTS_ROOT has another device than it). */
export function workspaceMounted(dir: string): boolean {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  return st !== undefined && st.dev !== fs.statSync(MOUNTS_ROOT).dev;
}
