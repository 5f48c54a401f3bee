import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  isMountPoint,
  loopDeviceMountedAt,
  loopDevicesBackedBy,
  mountPointsOf,
  mountTable,
  readSys,
} from "./mount-table.ts";
import { processStartTime } from "./sandbox-layout.ts";

const run = promisify(execFile);
/** Where mkfs.ext4, mount, umount, losetup and flock live; nothing from the service's own PATH. */
const TOOLS_ENV = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LC_ALL: "C" };
/**
 * nosuid, nodev: nothing in a workspace can gain privileges or reach a device.
 * Not noexec: commands run the scripts and binaries they build there.
 * noinit_itable: no background zeroing of inode tables, which would allocate
 * (and so take host disk for) blocks nobody wrote.
 */
const MOUNT_OPTIONS = "nosuid,nodev,noinit_itable";

/**
 * Every workspace image of this host is mounted below this one directory (a
 * small root-only tmpfs), never under the data directory. A sandbox's
 * launcher copies the host's mounts when it makes its mount namespace and
 * then detaches this whole tree at once (`umount -l`), so no namespace holds
 * another workspace's filesystem (and loop device) after it is unmounted.
 */
export const MOUNTS_ROOT = "/run/platform-compute-workspaces";

/**
 * Who keeps a mount (`<mount point>.owner` beside it): the mounting process,
 * and whether the mount is to end with it (sandboxes that die with the
 * service). A mount whose owner is gone while it should have ended with it
 * (a killed service or test run) is released by the next sweep.
 */
interface MountOwner {
  pid: number;
  startTime: string;
  endsWithOwner: boolean;
}

export interface MountOptions {
  /** The mount ends with this process (a driver whose sandboxes die with it). */
  endsWithProcess?: boolean;
}

/**
 * One workspace as its own ext4 filesystem in a sparse image file, so its
 * size is enforced by the kernel: a write past it fails with ENOSPC in the
 * writer, and the host's disk never gives more than the image's size.
 *
 * A unit of its own (an image file and where it is mounted), so a workspace
 * can outlive the sandbox that mounts it. The image must stay where no
 * sandbox can write it (a crafted ext4 image is an attack on the kernel):
 * root-owned, mode 0600, outside every workspace.
 */
export class WorkspaceImage {
  constructor(readonly file: string) {}

  exists(): boolean {
    return fs.existsSync(this.file);
  }

  /**
   * Makes the image and mounts it; returns the mount point. The image is a
   * sparse file of `sizeBytes` (only what is written takes disk) with an
   * ext4 filesystem whose root belongs to `owner` (mode 0700, mkfs's empty
   * lost+found removed, so a workspace starts empty), no blocks reserved for
   * root, and nothing zeroed up front (a hole reads as zeros already). mkfs
   * and mount run in one process: starting one from the service costs more
   * than either. Refuses to overwrite an existing file.
   */
  async create(sizeBytes: number, owner: { uid: number; gid: number }, options: MountOptions = {}): Promise<string> {
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
    const fd = fs.openSync(this.file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      fs.ftruncateSync(fd, Math.ceil(sizeBytes / 4096) * 4096);
    } finally {
      fs.closeSync(fd);
    }
    try {
      await ensureMountsRoot();
      const dir = this.mountPoint();
      fs.mkdirSync(dir, { mode: 0o700 });
      const extended = `root_owner=${owner.uid}:${owner.gid},lazy_itable_init=1,lazy_journal_init=1,nodiscard`;
      // No resize_inode: its reserved descriptor blocks were 2.5 of the 2.7 MiB
      // a fresh 5Gi image wrote (and most of mkfs's time).
      const script = `mkfs.ext4 -q -F -m 0 -O ^resize_inode -E "$3" "$1" && mount -t ext4 -o "loop,$4" "$1" "$2"`;
      await run("sh", ["-c", script, "sh", this.file, dir, extended, MOUNT_OPTIONS], {
        env: TOOLS_ENV,
        timeout: 60_000,
      });
      writeOwner(dir, options);
      fs.chmodSync(dir, 0o700);
      fs.rmdirSync(join(dir, "lost+found"));
      return dir;
    } catch (err) {
      await this.remove().catch(() => {});
      throw err;
    }
  }

  /**
   * The host directory the image is mounted at: named by the image file's
   * device and inode, so it survives renaming the directory holding the
   * image (a warm sandbox adopted) and a restart of the service.
   */
  mountPoint(): string {
    const st = fs.statSync(this.file);
    return join(MOUNTS_ROOT, `ws-${st.dev}-${st.ino}`);
  }

  isMounted(): boolean {
    return isMountPoint(this.mountPoint());
  }

  /**
   * Mounts the image at its mount point unless it is mounted there already,
   * and returns that directory. A loop device still attached to this image
   * is reused, so the filesystem is never opened twice through two devices.
   */
  async mount(options: MountOptions = {}): Promise<string> {
    await ensureMountsRoot();
    const dir = this.mountPoint();
    for (let attempt = 0; !isMountPoint(dir); attempt++) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      // Ours before it is mounted: the sweep removes an empty mount point whose recorded owner died.
      writeOwner(dir, options);
      const attached = loopDevicesBackedBy(this.file)[0];
      const args = attached
        ? ["-t", "ext4", "-o", MOUNT_OPTIONS, attached, dir]
        : ["-t", "ext4", "-o", `loop,${MOUNT_OPTIONS}`, this.file, dir];
      try {
        await run("mount", args, { env: TOOLS_ENV, timeout: 30_000 });
      } catch (err) {
        // A sweep that had read a dead owner's record may have removed the mount point meanwhile,
        // or the device found may be detaching (autoclear, as the last sandbox of a killed service
        // that held it ends): look again.
        if (attempt >= 3) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    // Whoever mounts (or re-attaches) it keeps it now.
    writeOwner(dir, options);
    return dir;
  }

  /** Unmounts the image wherever this namespace has it mounted and lets its loop device go; the file stays. */
  async unmount(): Promise<void> {
    // Mounted at its mount point, that device is the image's one (mount() reuses an attached
    // device, never attaches a second): released without reading every loop device's backing
    // file, which took 12 ms of the event loop per destroy with 500 workspaces mounted.
    const mounted = this.exists() ? loopDeviceMountedAt(this.mountPoint(), this.file) : undefined;
    if (mounted) await releaseDevice(mounted);
    else await releaseImages(this.file);
    if (this.exists()) removeMountPoint(this.mountPoint());
  }

  /** Unmounts (if mounted) and deletes the image. */
  async remove(): Promise<void> {
    if (this.exists()) {
      const dir = this.mountPoint();
      await releaseImages(this.file);
      removeMountPoint(dir);
    }
    await fs.promises.rm(this.file, { force: true });
  }
}

let mountsRoot: Promise<void> | undefined;
/** Room for ~32,000 workspaces' mount points and owner records (8 KiB each at most). */
const MOUNTS_ROOT_SIZE = "256m";

/** Mounts MOUNTS_ROOT once per host (under a lock: two services starting at once must not stack two). */
function ensureMountsRoot(): Promise<void> {
  mountsRoot ??= (async () => {
    fs.mkdirSync(MOUNTS_ROOT, { recursive: true, mode: 0o700 });
    // Each workspace keeps a mount point and its `.owner` record here, a page of the tmpfs each: 4 MiB
    // held ~500 workspaces and the 501st create failed with ENOSPC (the bench's 1,000 paused
    // sandboxes). A tmpfs takes memory only for what it holds; one mounted smaller by an older
    // service is grown in place.
    const script = `if mountpoint -q "$1"; then mount -o remount,size=${MOUNTS_ROOT_SIZE} "$1"; else mount -t tmpfs -o mode=0700,size=${MOUNTS_ROOT_SIZE},nosuid,nodev,noexec platform-compute-workspaces "$1"; fi`;
    await run("flock", [`${MOUNTS_ROOT}.lock`, "sh", "-c", script, "sh", MOUNTS_ROOT], {
      env: TOOLS_ENV,
      timeout: 30_000,
    });
  })();
  mountsRoot.catch(() => {
    mountsRoot = undefined;
  });
  return mountsRoot;
}

/**
 * Releases the images at `path` (a file, or every image file below a
 * directory): each of their loop devices' mounts in this namespace is
 * unmounted (lazily if busy), mount points under MOUNTS_ROOT are removed, and
 * the devices are detached. A device still in use elsewhere (a sandbox's
 * namespace not yet gone) detaches itself when that use ends (autoclear).
 */
export async function releaseImages(path: string): Promise<void> {
  for (const device of loopDevicesBackedBy(path)) await releaseDevice(device);
}

/** Unmounts a loop device's mounts in this namespace (lazily if busy), removes its mount points, detaches it. */
async function releaseDevice(device: string): Promise<void> {
  const points = mountPointsOf(device);
  // One process per device (starting one from the service is the cost);
  // losetup -d fails harmlessly once autoclear has detached the device.
  // A point someone else unmounted meanwhile is fine; one still mounted after both tries is not.
  const script = `d=$1; shift; for p; do umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || ! mountpoint -q "$p" || exit 1; done; losetup -d "$d" 2>/dev/null; exit 0`;
  await run("sh", ["-c", script, "sh", device, ...points], { env: TOOLS_ENV, timeout: 30_000 });
  for (const point of points) if (point.startsWith(`${MOUNTS_ROOT}/`)) removeMountPoint(point);
}

/**
 * Removing the mount point also detaches the copies other mount namespaces
 * still hold of that mount (the kernel does so since 3.18), which lets the
 * loop device go while sandboxes started before the unmount keep running.
 */
function removeMountPoint(dir: string): void {
  try {
    fs.rmdirSync(dir);
    fs.rmSync(`${dir}.owner`, { force: true });
  } catch {
    // absent, or still mounted (then it stays for the next release)
  }
}

function writeOwner(dir: string, options: MountOptions): void {
  const owner: MountOwner = {
    pid: process.pid,
    startTime: processStartTime(process.pid),
    endsWithOwner: options.endsWithProcess === true,
  };
  fs.writeFileSync(`${dir}.owner`, JSON.stringify(owner), { mode: 0o600 });
}

/**
 * Releases workspace mounts of this host that nobody will use again: those
 * whose image file was deleted (its data directory removed), and those that
 * were to end with a process that is gone without unmounting them (a killed
 * service or test run whose sandboxes died with it). A mount kept for
 * sandboxes that outlive their service (the default) is never touched.
 * Returns the mount points released.
 */
export async function releaseOrphanedMounts(): Promise<string[]> {
  let names: string[];
  try {
    names = fs.readdirSync(MOUNTS_ROOT).filter((n) => /^ws-\d+-\d+$/.test(n));
  } catch {
    return [];
  }
  const table = mountTable();
  const released: string[] = [];
  for (const name of names) {
    const dir = join(MOUNTS_ROOT, name);
    const mount = table.find((m) => m.point === dir);
    let owner: MountOwner | undefined;
    try {
      owner = JSON.parse(fs.readFileSync(`${dir}.owner`, "utf8")) as MountOwner;
    } catch {
      owner = undefined;
    }
    const ownerDead = owner !== undefined && processStartTime(owner.pid) !== owner.startTime;
    if (!mount) {
      // An empty leftover; a young one of a live owner may be an image being made right now.
      const st = fs.statSync(dir, { throwIfNoEntry: false });
      if (ownerDead || (st && Date.now() - st.mtimeMs > 10 * 60_000)) removeMountPoint(dir);
      continue;
    }
    const backing = readSys(`/sys/dev/block/${mount.device}/loop/backing_file`);
    const imageDeleted = backing?.endsWith(" (deleted)") ?? false;
    const ownerGone = owner?.endsWithOwner === true && ownerDead;
    if (!imageDeleted && !ownerGone) continue;
    const device = `/dev/${readSys(`/sys/dev/block/${mount.device}/uevent`)?.match(/DEVNAME=(\S+)/)?.[1] ?? ""}`;
    const script = `umount "$1" 2>/dev/null || umount -l "$1" || exit 1; [ "$2" = /dev/ ] || losetup -d "$2" 2>/dev/null; exit 0`;
    try {
      await run("sh", ["-c", script, "sh", dir, device], { env: TOOLS_ENV, timeout: 30_000 });
    } catch {
      continue;
    }
    removeMountPoint(dir);
    released.push(dir);
  }
  return released;
}
