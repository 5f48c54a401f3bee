import * as fs from "node:fs";
import * as os from "node:os";

export interface Machine {
  cpu: string;
  cores: number;
  memory: string;
  kernel: string;
  node: string;
  date: string;
  load: string;
}

/** What the numbers were measured on. */
export function describeMachine(): Machine {
  let memLimit = "";
  for (const f of ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]) {
    try {
      const v = fs.readFileSync(f, "utf8").trim();
      if (v !== "max" && Number(v) < os.totalmem())
        memLimit = ` (cgroup limit ${(Number(v) / 2 ** 30).toFixed(1)} GiB)`;
    } catch {
      // not there
    }
  }
  return {
    cpu: os.cpus()[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB${memLimit}`,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    date: new Date().toISOString(),
    load: os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" "),
  };
}

/**
 * CPU time the hypervisor took from this virtual machine so far (the steal
 * column of /proc/stat, all CPUs), in ms; 0 where there is none to read. A
 * figure measured while the host ran other guests' work is slower for it,
 * which the figure's own baseline does not always share.
 */
export function stolenCpuMs(): number {
  try {
    const cpu = fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!.trim().split(/\s+/);
    // cpu user nice system idle iowait irq softirq steal …, in USER_HZ (100 a second).
    return Number(cpu[8] ?? 0) * 10;
  } catch {
    return 0;
  }
}
