import * as fs from "node:fs";

// What the kernel says is mounted (this process's mount namespace) and which
// loop devices back which files; read from /proc and sysfs, no process started.

/** A sysfs or procfs value, trimmed; undefined when absent. */
export function readSys(path: string): string | undefined {
  try {
    return fs.readFileSync(path, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Whether `dir` is a mount point in this process's mount namespace. */
export function isMountPoint(dir: string): boolean {
  return mountTable().some((m) => m.point === dir);
}

/** Mount points (this namespace) of a block device such as /dev/loop3, found by its major:minor. */
export function mountPointsOf(device: string): string[] {
  let rdev: number;
  try {
    rdev = fs.statSync(device).rdev;
  } catch {
    return [];
  }
  const id = deviceId(rdev);
  return mountTable()
    .filter((m) => m.device === id)
    .map((m) => m.point)
    .sort((a, b) => b.length - a.length);
}

/** A device number as the kernel writes it ("major:minor": mountinfo's third field, the names in /sys/dev/block). */
function deviceId(dev: number): string {
  // Linux's dev_t: major in bits 8-19, minor in bits 0-7 and 20-31.
  return `${(dev >> 8) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & 0xfff00)}`;
}

/**
 * The loop device (`/dev/loopN`) of the filesystem mounted at `dir`, if it
 * is backed by `file`: named by dir's device number (a stat and two sysfs
 * reads), where loopDevicesBackedBy reads every attached device's backing
 * file (12 ms of the event loop with 500 workspaces mounted). undefined
 * when nothing of file is mounted there.
 */
export function loopDeviceMountedAt(dir: string, file: string): string | undefined {
  let dev: number;
  let target: string;
  try {
    dev = fs.statSync(dir).dev;
    target = fs.realpathSync(file);
  } catch {
    return undefined;
  }
  const sys = `/sys/dev/block/${deviceId(dev)}`;
  if (readSys(`${sys}/loop/backing_file`)?.replace(/ \(deleted\)$/, "") !== target) return undefined;
  const name = readSys(`${sys}/uevent`)?.match(/DEVNAME=(\S+)/)?.[1];
  return name ? `/dev/${name}` : undefined;
}

/** Mount points (this namespace) at or below `dir`. */
export function mountPointsUnder(dir: string): string[] {
  return mountTable()
    .map((m) => m.point)
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
}

/**
 * Loop devices (`/dev/loopN`) whose backing file is `path`, or lies below it
 * when it is a directory. Read from procfs and sysfs, so no process is started.
 */
export function loopDevicesBackedBy(path: string): string[] {
  let target = path;
  try {
    target = fs.realpathSync(path);
  } catch {
    // gone already: compare the name as given
  }
  const found: string[] = [];
  for (const name of attachedLoopDevices()) {
    let backing: string;
    try {
      backing = fs.readFileSync(`/sys/block/${name}/loop/backing_file`, "utf8").trim();
    } catch {
      continue; // detached meanwhile
    }
    backing = backing.replace(/ \(deleted\)$/, "");
    if (backing === target || backing.startsWith(`${target}/`)) found.push(`/dev/${name}`);
  }
  return found;
}

/**
 * Names (`loopN`) of the loop devices that have a backing file. The kernel
 * keeps every loop device it ever made until it is removed, attached or not
 * (a machine that once held 1,000 workspaces has 1,000), and probing each
 * one's backing_file cost 12 ms a call at 1,004 devices, on the event loop of
 * every create and destroy. /proc/partitions lists only devices with a
 * capacity, i.e. attached ones (0.14 ms). A device attached to an empty file
 * has none and is not listed; the images looked up here are never empty
 * (32 MiB at least), and without /proc every device is probed as before.
 */
function attachedLoopDevices(): string[] {
  try {
    return fs
      .readFileSync("/proc/partitions", "utf8")
      .split("\n")
      .map((line) => line.trim().split(/\s+/)[3] ?? "")
      .filter((n) => /^loop\d+$/.test(n));
  } catch {
    try {
      return fs.readdirSync("/sys/block").filter((n) => /^loop\d+$/.test(n));
    } catch {
      return [];
    }
  }
}

export function mountTable(): Array<{ device: string; point: string }> {
  let text: string;
  try {
    text = fs.readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  const rows: Array<{ device: string; point: string }> = [];
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    if (fields.length < 5) continue;
    rows.push({ device: fields[2] as string, point: unescapeMountField(fields[4] as string) });
  }
  return rows;
}

/** /proc/self/mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}
