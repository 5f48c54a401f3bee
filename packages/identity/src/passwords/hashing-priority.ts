import { readlink } from "node:fs/promises";
import { getPriority, setPriority } from "node:os";

/** libuv's threadpool size: UV_THREADPOOL_SIZE when the pool started, else 4 (libuv caps it at 1024). */
function poolSize(): number {
  const n = Number(process.env.UV_THREADPOOL_SIZE);
  return Number.isInteger(n) && n > 0 ? Math.min(n, 1024) : 4;
}

/**
 * The thread ids of libuv's threadpool (Linux), found by asking it: an
 * asynchronous readlink of /proc/thread-self runs in a pool thread and names
 * that thread. A batch of them lands on every idle thread of the pool, and
 * a few batches on busy ones too; empty where there is no /proc.
 */
export async function threadpoolIds(): Promise<number[]> {
  const want = poolSize();
  const seen = new Set<number>();
  try {
    for (let round = 0; round < 20 && seen.size < want; round++) {
      const links = await Promise.all(Array.from({ length: 16 * want }, () => readlink("/proc/thread-self")));
      for (const link of links) {
        const tid = Number(/task\/(\d+)$/.exec(link)?.[1]);
        if (tid && tid !== process.pid) seen.add(tid);
      }
    }
  } catch {
    return [];
  }
  return [...seen];
}

/**
 * Lowers the scheduling priority of libuv's threadpool threads `steps` nice
 * values below the process's own (at most to 19; Linux: a thread's nice
 * value is its own). argon2 hashes there: with the pool below the event
 * loop, a hash gets the CPU the event loop leaves, and the event loop, which
 * accepts connections and sheds logins that cannot be served, gets a core
 * when it needs one (issue 15 item 4: at the same priority two hashes took
 * both cores of a 2-core machine through a storm, and the loop's refusals
 * reached the clients seconds late). Relative, not absolute: a service
 * started at nice -19 (the bench's) hashed at 10 when the steps were a
 * value, below every ordinary process on the machine instead of below its
 * own loop (packages/bench/ANALYSIS.md, login). Raising a nice value needs
 * no privilege; lowering it back would, so this is done once, at start-up.
 * Returns the threads changed (none where there is no /proc or steps is 0).
 */
export async function lowerThreadpoolPriority(steps: number): Promise<number[]> {
  if (steps <= 0 || process.platform !== "linux") return [];
  const nice = Math.min(19, getPriority(process.pid) + steps);
  const changed: number[] = [];
  for (const tid of await threadpoolIds()) {
    try {
      if (getPriority(tid) < nice) setPriority(tid, nice);
      changed.push(tid);
    } catch {
      // A thread that ended, or a system that refuses: hashing keeps its priority.
    }
  }
  return changed;
}
