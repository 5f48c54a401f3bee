import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { basename } from "node:path";
import { promisify } from "node:util";
import { loopDeviceMountedAt, loopDevicesBackedBy } from "./mount-table.ts";

const run = promisify(execFile);

/** Bytes read from and written to a block device. */
export interface IoBytes {
  read: number;
  write: number;
}

/**
 * The kernel's I/O counters of the loop device that holds a workspace's
 * image (`/sys/block/loopN/stat`): every byte the workspace's filesystem
 * read from or wrote to its disk, whoever caused it (a command, the file
 * calls, the filesystem's own metadata and journal). Exact per workspace,
 * which cgroup v1 block I/O counters are not (buffered writes are charged to
 * the kernel's flusher, and a command's fsync through a loop device showed 0).
 */
export class WorkspaceIo {
  private constructor(
    /** The loop device's name, to tell a re-attached image (counters from 0) apart. */
    readonly device: string,
    private readonly backing: string,
  ) {}

  /**
   * The counters of the loop device backing imageFile, if it is attached;
   * found from mountedAt (where the image is mounted) when given, every
   * loop device looked at only when it is not mounted there.
   */
  static of(imageFile: string, mountedAt?: string): WorkspaceIo | undefined {
    const device =
      (mountedAt ? loopDeviceMountedAt(mountedAt, imageFile) : undefined) ?? loopDevicesBackedBy(imageFile)[0];
    if (!device) return undefined;
    return new WorkspaceIo(basename(device), fs.realpathSync(imageFile));
  }

  /** Totals since the device was attached; undefined once it is detached (or now backs another file). */
  read(): IoBytes | undefined {
    let text: string;
    try {
      // Device names are reused: the counters are ours only while it still holds our image.
      const backing = fs.readFileSync(`/sys/block/${this.device}/loop/backing_file`, "utf8").trim();
      if (backing !== this.backing) return undefined;
      text = fs.readFileSync(`/sys/block/${this.device}/stat`, "utf8");
    } catch {
      return undefined;
    }
    // Fields 3 and 7: sectors read and written, always in units of 512 bytes.
    const f = text.trim().split(/\s+/).map(Number);
    return { read: (f[2] ?? 0) * 512, write: (f[6] ?? 0) * 512 };
  }
}

/** What `now` adds to `base` (0 for a counter that restarted: the device was attached again). */
export function ioSince(now: IoBytes, base: IoBytes): IoBytes {
  return { read: Math.max(0, now.read - base.read), write: Math.max(0, now.write - base.write) };
}

/** Writes the workspace's dirty pages to its disk (syncfs), so the counters include buffered writes. */
export async function flushWorkspace(mountPoint: string): Promise<void> {
  await run("sync", ["-f", mountPoint], { env: { PATH: "/usr/bin:/bin" }, timeout: 60_000 });
}
