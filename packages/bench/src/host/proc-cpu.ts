import { readdirSync, readFileSync } from "node:fs";

/** /proc's clock ticks a second (USER_HZ): 100 on every Linux the bench runs on. */
const TICK_MS = 1000 / 100;

type Stat = { comm: string; parent: number; userMs: number; systemMs: number };

/** /proc/<pid>/stat's fields the bench reads; undefined once the process is gone. */
function statOf(pid: number | string): Stat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command sits in parentheses and may hold spaces or parentheses itself: the fields follow the last ")".
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return {
    comm: text.slice(text.indexOf("(") + 1, text.lastIndexOf(")")),
    parent: Number(f[1]),
    userMs: Number(f[11]) * TICK_MS,
    systemMs: Number(f[12]) * TICK_MS,
  };
}

/** CPU time (user + system, every thread) of process `pid` so far, in ms; 0 once it is gone. */
export function processCpuMs(pid: number): number {
  const s = statOf(pid);
  return s ? s.userMs + s.systemMs : 0;
}

/**
 * CPU time so far (ms) of every process whose command name `match`es, summed,
 * and how many there are:
 * for the work of processes the bench did not start itself (PostgreSQL's
 * backends) or does not hold a handle on (a helper's children).
 */
export function processesCpuMs(match: (s: Stat) => boolean): { user: number; system: number; processes: number } {
  const total = { user: 0, system: 0, processes: 0 };
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const s = statOf(pid);
    if (!s || !match(s)) continue;
    total.processes++;
    total.user += s.userMs;
    total.system += s.systemMs;
  }
  return total;
}
