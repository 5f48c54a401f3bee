import { readFileSync } from "node:fs";

/** A process's start time (/proc/<pid>/stat field 22), to tell a reused pid apart; undefined when it is gone or a zombie. */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" ? undefined : fields[19];
  } catch {
    return undefined;
  }
}

/**
 * The process group a test started (a child spawned with `detached: true`),
 * signalled only while its id can still be ours. Once the leader and every
 * member are gone the kernel hands the id out again (pid_max is 32,768 here
 * and a test run starts tens of thousands of processes), often to another
 * detached child (a sandbox, another test's launcher): a late
 * `process.kill(-pid)` would then hit that group.
 */
export class ProcessGroup {
  readonly #start: string | undefined;

  constructor(readonly pid: number) {
    this.#start = startTime(pid);
  }

  /** Sends signal to the group unless its id now names another process's group; whether it was sent. */
  signal(signal: NodeJS.Signals): boolean {
    const now = startTime(this.pid);
    // A process with our leader's pid but another start time: the id was handed out again.
    if (now !== undefined && now !== this.#start) return false;
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }
}
