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
