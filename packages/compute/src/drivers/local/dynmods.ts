import { execFileSync } from "node:child_process";
import * as fs from "node:fs";

/** Where the driver mounts its empty cgroup v1 hierarchy that turns favordynmods on. */
export const DYNMODS_MOUNT = "/run/platform-compute-dynmods";

/**
 * Makes moving a process between cgroups cheap for the whole machine.
 *
 * The kernel guards every cgroup migration with one global rwsem whose fast
 * read path (fork, exit) costs the writer an RCU grace period: the first
 * write to a cgroup.procs after a quiet spell took 12-20 ms here, most of a
 * released sandbox's 38 ms resume. With favordynmods on any mounted hierarchy
 * the kernel keeps that rwsem in its slow mode instead (forks and exits take
 * an atomic more), and the same writes take 0.4 ms. An empty named hierarchy
 * is mounted for it, not a remount of the host's: nothing of the host's
 * cgroups changes. It stays mounted after the service ends (other drivers of
 * the machine may rely on it). Linux 6.18 makes the switch one-way: from the
 * first favordynmods mount until a reboot, writes to cgroup.procs take a
 * per-threadgroup rwsem and never wait a grace period, and an `umount` of the
 * hierarchy does not bring the old mode back (measured on a machine where
 * it had been mounted and unmounted since boot: 0.3 ms writes, where a grace
 * period is 8-12 ms).
 */
export function favorDynamicCgroupMods(): "on" | "already" | { unavailable: string } {
  if (favorDynmodsMounted()) return "already";
  try {
    fs.mkdirSync(DYNMODS_MOUNT, { recursive: true, mode: 0o755 });
    execFileSync("mount", ["-t", "cgroup", "-o", "none,name=platform-dynmods,favordynmods", "cgroup", DYNMODS_MOUNT], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  } catch (err) {
    // Another driver of the machine mounted it meanwhile.
    if (favorDynmodsMounted()) return "already";
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return { unavailable: stderr || (err as Error).message };
  }
  return "on";
}

/** A cgroup hierarchy (v1 or v2) mounted with favordynmods, which sets the rwsem's mode for all of them. */
export function favorDynmodsMounted(): boolean {
  for (const line of fs.readFileSync("/proc/self/mounts", "utf8").split("\n")) {
    const [, , type, options] = line.split(" ");
    if ((type === "cgroup" || type === "cgroup2") && options?.split(",").includes("favordynmods")) return true;
  }
  return false;
}
