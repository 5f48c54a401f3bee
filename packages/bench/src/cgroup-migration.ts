import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** What moving a process into a cgroup costs on this machine now, and what that says of the kernel's mode. */
export interface MigrationProbe {
  /** Median of the tries: one cgroup.procs write after a quiet spell. */
  ms: number;
  /**
   * "grace-period": the write waited an RCU grace period (the kernel's global
   * migration lock); "per-threadgroup": it did not. Linux 6.18 switches to
   * the per-threadgroup lock the first time any cgroup hierarchy is mounted
   * with favordynmods and never back until a reboot (an unmount leaves it),
   * so a machine that ran the local driver's dynmods test, or compute with
   * COMPUTE_CGROUP_FAVOR_DYNMODS=1, since its boot moves processes cheaply.
   */
  mode: "grace-period" | "per-threadgroup";
}

/** Below this a write did not wait a grace period (one is 4.8-16 ms, p50 7.8, on the 2-core VM of the bench, timed by membarrier). */
const NO_GRACE_PERIOD_MS = 3;

/**
 * Times the move of a sleeping process into a fresh cgroup of the pids
 * hierarchy (v1) or the unified one (v2) after a quiet spell, a few times.
 * undefined where it cannot (not root, no cgroup filesystem). The figures
 * whose numbers hang on a cgroup migration report it, so a number measured
 * on a machine in the cheap mode is not read as the code's doing.
 */
export async function probeCgroupMigration(tries = 3, quietMs = 300): Promise<MigrationProbe | undefined> {
  const parent = probeParent();
  if (!parent) return undefined;
  const dir = join(parent, `platform-compute-bench-probe-${process.pid}`);
  const times: number[] = [];
  try {
    fs.mkdirSync(dir);
  } catch {
    return undefined;
  }
  try {
    for (let i = 0; i < tries; i++) {
      const child = spawn("/bin/sleep", ["30"], { stdio: "ignore" });
      const exited = new Promise((r) => child.once("exit", r));
      try {
        await sleep(quietMs);
        const t0 = performance.now();
        fs.writeFileSync(join(dir, "cgroup.procs"), `${child.pid}\n`);
        times.push(performance.now() - t0);
      } finally {
        child.kill("SIGKILL");
        await exited;
      }
    }
  } catch {
    return undefined;
  } finally {
    for (let i = 0; i < 50; i++) {
      try {
        fs.rmdirSync(dir);
        break;
      } catch {
        await sleep(20); // the killed sleep leaves the cgroup a moment after its exit is reported
      }
    }
  }
  const sorted = times.sort((a, b) => a - b);
  const ms = sorted[Math.floor(sorted.length / 2)] as number;
  return { ms, mode: ms < NO_GRACE_PERIOD_MS ? "per-threadgroup" : "grace-period" };
}

/** Our own cgroup in the pids hierarchy (v1) or the unified root (v2), where a probe cgroup may be made. */
function probeParent(): string | undefined {
  if (fs.existsSync("/sys/fs/cgroup/cgroup.controllers")) return "/sys/fs/cgroup";
  if (!fs.existsSync("/sys/fs/cgroup/pids")) return undefined;
  let own = "/";
  try {
    for (const line of fs.readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
      const [, controllers, path] = line.split(":");
      if (controllers?.split(",").includes("pids") && path) own = path;
    }
  } catch {
    return undefined;
  }
  return join("/sys/fs/cgroup/pids", own);
}
