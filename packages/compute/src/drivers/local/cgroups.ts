import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Raw counters of one cgroup; 0 where the host does not expose a counter. */
export interface CgroupStats {
  cpuNs: number;
  memoryBytes: number;
  memoryPeakBytes: number;
  ioReadBytes: number;
  ioWriteBytes: number;
  oomKills: number;
  pids: number;
}

/** An exec cgroup's counters for its completed event (Cgroup.execCounters): io and oomKills only when asked for. */
export interface ExecCounters {
  cpuNs: number;
  memoryPeakBytes: number;
  io?: { read: number; write: number };
  oomKills?: number;
}

export interface CgroupLimits {
  cpuMillis: number;
  memoryBytes: number;
  pidsMax: number;
}

/**
 * One logical cgroup (the same relative path in every controller we use):
 * a sandbox, or one exec inside it. v1 keeps one directory per controller
 * hierarchy; v2 one directory.
 */
export class Cgroup {
  constructor(
    readonly version: 1 | 2,
    /** Directory per controller name (v2: the single dir under "unified"). */
    readonly dirs: Record<string, string>,
  ) {}

  /** The cgroup.procs files a process writes its pid into to join. */
  procsFiles(): string[] {
    return [...new Set(Object.values(this.dirs))].map((d) => join(d, "cgroup.procs"));
  }

  child(name: string): Cgroup {
    const dirs: Record<string, string> = {};
    for (const [k, d] of Object.entries(this.dirs)) dirs[k] = join(d, name);
    return new Cgroup(this.version, dirs);
  }

  create(limits?: CgroupLimits): void {
    for (const d of new Set(Object.values(this.dirs))) fs.mkdirSync(d, { recursive: true });
    if (this.version === 2) {
      // Children of this cgroup (execs) get the same controllers.
      tryWrite(join(this.dirs.unified as string, "cgroup.subtree_control"), "+cpu +memory +pids +io");
    }
    if (limits) this.applyLimits(limits);
  }

  /** Sets (or changes) the cpu quota, memory cap and process cap. */
  applyLimits(limits: CgroupLimits): void {
    const quota = Math.max(1000, Math.round(limits.cpuMillis * 100)); // period 100 ms
    if (this.version === 1) {
      write(join(this.dirs.cpu as string, "cpu.cfs_period_us"), "100000");
      write(join(this.dirs.cpu as string, "cpu.cfs_quota_us"), String(quota));
      // No swap escape hatch: memory+swap capped at the same value when the kernel accounts swap.
      // memsw may never be below the memory cap, so it goes first when raising and last when lowering.
      const memsw = join(this.dirs.memory as string, "memory.memsw.limit_in_bytes");
      tryWrite(memsw, String(limits.memoryBytes));
      write(join(this.dirs.memory as string, "memory.limit_in_bytes"), String(limits.memoryBytes));
      tryWrite(memsw, String(limits.memoryBytes));
      write(join(this.dirs.pids as string, "pids.max"), String(limits.pidsMax));
    } else {
      const d = this.dirs.unified as string;
      write(join(d, "cpu.max"), `${quota} 100000`);
      write(join(d, "memory.max"), String(limits.memoryBytes));
      tryWrite(join(d, "memory.swap.max"), "0");
      write(join(d, "pids.max"), String(limits.pidsMax));
    }
  }

  /** The same cgroup under another name in the same parent; its processes stay in it. */
  rename(name: string): Cgroup {
    const dirs: Record<string, string> = {};
    const renamed = new Map<string, string>();
    for (const [k, d] of Object.entries(this.dirs)) {
      const to = join(dirname(d), name);
      if (!renamed.has(d)) {
        fs.renameSync(d, to);
        renamed.set(d, to);
      }
      dirs[k] = to;
    }
    return new Cgroup(this.version, dirs);
  }

  /**
   * An exec's cgroup (no limits of its own): the directories made on the
   * thread pool, in parallel, since v1 makes one per hierarchy. forExecs:
   * its children get the controllers (v2), as create() does.
   */
  async createAsync(forExecs = false): Promise<void> {
    await Promise.all([...new Set(Object.values(this.dirs))].map((d) => fs.promises.mkdir(d)));
    if (forExecs && this.version === 2)
      tryWrite(join(this.dirs.unified as string, "cgroup.subtree_control"), "+cpu +memory +pids +io");
  }

  exists(): boolean {
    return Object.values(this.dirs).some((d) => fs.existsSync(d));
  }

  /** Processes in this cgroup and all its descendants (cgroup.procs lists only its own). */
  pids(): number[] {
    const out = new Set<number>();
    // Every process joins all hierarchies together, so one controller's tree is the full list.
    const one = this.dirs.pids ?? this.dirs.freezer ?? this.dirs.unified;
    const walk = (dir: string) => {
      let text = "";
      try {
        text = fs.readFileSync(join(dir, "cgroup.procs"), "utf8");
      } catch {
        return;
      }
      for (const line of text.split("\n")) if (line) out.add(Number(line));
      let subs: fs.Dirent[] = [];
      try {
        subs = fs.readdirSync(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const sub of subs) if (sub.isDirectory()) walk(join(dir, sub.name));
    };
    if (one) walk(one);
    return [...out];
  }

  /**
   * No process left in this cgroup or below: one counter read (pids.current
   * counts the whole subtree) instead of walking the tree, which is what a
   * finished exec almost always finds.
   */
  isEmpty(): boolean {
    const counter = this.dirs.pids ?? this.dirs.unified;
    if (counter) {
      const text = readText(join(counter, "pids.current")).trim();
      if (text !== "") return text === "0";
    }
    return this.pids().length === 0;
  }

  signalAll(signal: NodeJS.Signals): void {
    for (const pid of this.pids()) {
      try {
        process.kill(pid, signal);
      } catch {
        // already gone
      }
    }
  }

  /**
   * SIGKILLs every process in the cgroup, including ones forking while we
   * kill: the cgroup is frozen first so nothing can fork in between.
   */
  async killAll(timeoutMs = 10_000): Promise<void> {
    if (this.isEmpty()) return;
    const until = Date.now() + timeoutMs;
    try {
      while (Date.now() < until) {
        const pids = this.pids();
        if (pids.length === 0) return;
        await this.freeze(true);
        for (const pid of this.pids()) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // gone
          }
        }
        await this.freeze(false);
        if (this.version === 2) tryWrite(join(this.dirs.unified as string, "cgroup.kill"), "1");
        await sleep(10);
      }
    } finally {
      // Never leave a cgroup frozen (a frozen process cannot even die of SIGKILL).
      await this.freeze(false);
    }
  }

  /**
   * Freezes (on) or thaws every process of this cgroup and its descendants
   * (v1 freezer.state, v2 cgroup.freeze): a frozen process runs no code and
   * keeps its memory; thawing lets it go on where it was. Resolves with
   * whether the cgroup reached the state (v1 may report FREEZING for a while
   * under load: waited for up to timeoutMs).
   */
  async setFrozen(on: boolean, timeoutMs = 2000): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    if (this.version === 1) {
      const f = this.dirs.freezer ? join(this.dirs.freezer, "freezer.state") : undefined;
      if (!f || !tryWrite(f, on ? "FROZEN" : "THAWED")) return false;
      const want = on ? "FROZEN" : "THAWED";
      for (;;) {
        if (readText(f).trim() === want) return true;
        if (Date.now() > until) return false;
        // A write again moves a FREEZING cgroup on (the kernel retries tasks that were busy).
        await sleep(1);
        tryWrite(f, want);
      }
    }
    const d = this.dirs.unified as string;
    if (!tryWrite(join(d, "cgroup.freeze"), on ? "1" : "0")) return false;
    for (;;) {
      if (readKey(readText(join(d, "cgroup.events")), "frozen") === (on ? 1 : 0)) return true;
      if (Date.now() > until) return false;
      await sleep(1);
    }
  }

  /** Whether this cgroup is frozen (by us: FROZEN or FREEZING in v1, cgroup.freeze in v2). */
  isFrozen(): boolean {
    if (this.version === 1) {
      const state = this.dirs.freezer ? readText(join(this.dirs.freezer, "freezer.state")).trim() : "";
      return state === "FROZEN" || state === "FREEZING";
    }
    return readText(join(this.dirs.unified as string, "cgroup.freeze")).trim() === "1";
  }

  /**
   * Asks the kernel to reclaim this cgroup's memory (v2 memory.reclaim, Linux
   * 5.19+): page cache is dropped, anonymous memory goes to swap if there is
   * any. v1 has no such knob for a cgroup that still holds processes; an
   * empty one (a released sandbox) drops its page cache by memory.force_empty.
   * Returns whether the kernel was asked.
   */
  reclaimMemory(): boolean {
    if (this.version !== 2) {
      return (
        this.dirs.memory !== undefined && this.isEmpty() && tryWrite(join(this.dirs.memory, "memory.force_empty"), "0")
      );
    }
    const d = this.dirs.unified as string;
    // The kernel reclaims what it can and then answers EAGAIN: asked either way.
    try {
      fs.writeFileSync(join(d, "memory.reclaim"), String(readNum(join(d, "memory.current")) || 1));
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "EAGAIN";
    }
  }

  private async freeze(on: boolean): Promise<void> {
    if (this.version === 1) {
      const f = this.dirs.freezer ? join(this.dirs.freezer, "freezer.state") : undefined;
      if (!f) return;
      if (!tryWrite(f, on ? "FROZEN" : "THAWED")) return;
      for (let i = 0; on && i < 100; i++) {
        if (readText(f).trim() === "FROZEN") return;
        await sleep(2);
      }
    } else {
      tryWrite(join(this.dirs.unified as string, "cgroup.freeze"), on ? "1" : "0");
    }
  }

  oomKills(): number {
    if (this.version === 1)
      return readKey(readText(join(this.dirs.memory as string, "memory.oom_control")), "oom_kill");
    return readKey(readText(join(this.dirs.unified as string, "memory.events")), "oom_kill");
  }

  /** Current memory use, the one counter the periodic sampling needs. */
  memoryBytes(): number {
    return this.version === 1
      ? readNum(join(this.dirs.memory as string, "memory.usage_in_bytes"))
      : readNum(join(this.dirs.unified as string, "memory.current"));
  }

  /**
   * What an exec's completed event reports of its cgroup, and no more (each
   * counter is a file read on the exec's path): CPU time and memory peak
   * always; block I/O only when want.io (the workspace's own disk counters
   * replace it otherwise), OOM kills only when want.oomKills (an exec killed
   * by SIGKILL: no other exit is reported as out of memory).
   */
  execCounters(want: { io: boolean; oomKills: boolean }): ExecCounters {
    const oom = want.oomKills ? { oomKills: this.oomKills() } : {};
    if (this.version === 1) {
      const mem = this.dirs.memory as string;
      return {
        cpuNs: readNum(join(this.dirs.cpuacct ?? "", "cpuacct.usage")),
        memoryPeakBytes: readNum(join(mem, "memory.max_usage_in_bytes")),
        ...(want.io
          ? { io: parseBlkio(readText(join(this.dirs.blkio ?? "", "blkio.throttle.io_service_bytes_recursive"))) }
          : {}),
        ...oom,
      };
    }
    const d = this.dirs.unified as string;
    return {
      cpuNs: readKey(readText(join(d, "cpu.stat")), "usage_usec") * 1000,
      memoryPeakBytes: readNum(join(d, "memory.peak")) || readNum(join(d, "memory.current")),
      ...(want.io ? { io: parseIoStat(readText(join(d, "io.stat"))) } : {}),
      ...oom,
    };
  }

  stats(): CgroupStats {
    const counters = this.execCounters({ io: true, oomKills: true });
    const pids = this.version === 1 ? (this.dirs.pids ?? "") : (this.dirs.unified as string);
    return {
      cpuNs: counters.cpuNs,
      memoryBytes: this.memoryBytes(),
      memoryPeakBytes: counters.memoryPeakBytes,
      ioReadBytes: counters.io?.read ?? 0,
      ioWriteBytes: counters.io?.write ?? 0,
      oomKills: counters.oomKills ?? 0,
      pids: readNum(join(pids, "pids.current")),
    };
  }

  /** Removes the directories (children first); processes must be gone. */
  async remove(): Promise<void> {
    for (const d of new Set(Object.values(this.dirs))) {
      for (let i = 0; i < 50; i++) {
        try {
          for (const sub of await fs.promises.readdir(d, { withFileTypes: true })) {
            if (sub.isDirectory()) await this.child(sub.name).removeOne(join(d, sub.name));
          }
          await fs.promises.rmdir(d);
          break;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === "ENOENT") break;
          if (code !== "EBUSY" || i === 49) break;
          await sleep(20);
        }
      }
    }
  }

  /** Removes the directories if they are empty, without waiting (e.g. our prefix on shutdown). */
  removeIfEmpty(): void {
    for (const d of new Set(Object.values(this.dirs))) {
      try {
        fs.rmdirSync(d);
      } catch {
        // still has sandboxes, or gone
      }
    }
  }

  /** Names of the child cgroups (sandboxes under the driver's root, execs under a sandbox). */
  childNames(): string[] {
    const one = this.dirs.pids ?? this.dirs.unified ?? Object.values(this.dirs)[0];
    try {
      return fs
        .readdirSync(one as string, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => d.name);
    } catch {
      return [];
    }
  }

  /** Milliseconds since the cgroup was made (a cgroup directory's mtime is its creation). */
  ageMs(): number {
    const one = this.dirs.pids ?? this.dirs.unified ?? Object.values(this.dirs)[0];
    const st = fs.statSync(one as string, { throwIfNoEntry: false });
    return st ? Date.now() - st.mtimeMs : 0;
  }

  /**
   * Removes the cgroup and its descendants, deepest first, without waiting;
   * the kernel refuses to remove one that still holds a process, which then
   * stays (with its ancestors). Returns whether it is gone.
   */
  removeTreeSync(): boolean {
    const sweep = (dir: string): boolean => {
      let subs: fs.Dirent[] = [];
      try {
        subs = fs.readdirSync(dir, { withFileTypes: true });
      } catch {
        return true; // gone
      }
      for (const sub of subs) if (sub.isDirectory()) sweep(join(dir, sub.name));
      try {
        fs.rmdirSync(dir);
        return true;
      } catch {
        return false;
      }
    };
    let gone = true;
    for (const d of new Set(Object.values(this.dirs))) gone = sweep(d) && gone;
    return gone;
  }

  /**
   * Forks refused because pids.max was reached (pids.events "max"), in this
   * cgroup and its children: the kernel counts them where the fork happened.
   */
  pidsLimitHits(): number {
    const d = this.dirs.pids ?? this.dirs.unified;
    if (!d) return 0;
    let hits = readKey(readText(join(d, "pids.events")), "max");
    try {
      for (const sub of fs.readdirSync(d, { withFileTypes: true })) {
        if (sub.isDirectory()) hits += readKey(readText(join(d, sub.name, "pids.events")), "max");
      }
    } catch {
      // gone
    }
    return hits;
  }

  private async removeOne(dir: string): Promise<void> {
    for (let i = 0; i < 50; i++) {
      try {
        await fs.promises.rmdir(dir);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EBUSY") return;
        await sleep(20);
      }
    }
  }
}

/**
 * Finds the cgroup hierarchy of this host and builds cgroups under
 * `<our own cgroup>/<prefix>` so sandboxes stay inside whatever limits the
 * compute service itself runs under.
 */
export function detectCgroups(prefix: string, mount = "/sys/fs/cgroup"): Cgroup {
  const own = ownCgroupPaths();
  if (fs.existsSync(join(mount, "cgroup.controllers"))) {
    // v2: the "no internal processes" rule forbids nesting under our own (populated) cgroup.
    const base = join(mount, prefix);
    fs.mkdirSync(base, { recursive: true });
    tryWrite(join(mount, "cgroup.subtree_control"), "+cpu +memory +pids +io");
    tryWrite(join(base, "cgroup.subtree_control"), "+cpu +memory +pids +io");
    return new Cgroup(2, { unified: base });
  }
  const dirs: Record<string, string> = {};
  for (const controller of ["cpu", "cpuacct", "memory", "pids", "blkio", "freezer"]) {
    const root = join(mount, controller);
    if (!fs.existsSync(root)) {
      if (controller === "memory" || controller === "pids" || controller === "cpu") {
        throw new Error(`cgroup v1 controller ${controller} is not mounted at ${root}`);
      }
      continue;
    }
    const base = join(fs.realpathSync(root), own.get(controller) ?? "/", prefix);
    fs.mkdirSync(base, { recursive: true });
    dirs[controller] = base;
  }
  return new Cgroup(1, dirs);
}

function ownCgroupPaths(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readText("/proc/self/cgroup").split("\n")) {
    const [, controllers, path] = line.split(":");
    if (!controllers || path === undefined) continue;
    for (const c of controllers.split(",")) out.set(c, path);
  }
  return out;
}

function parseBlkio(text: string): { read: number; write: number } {
  let read = 0;
  let write = 0;
  for (const line of text.split("\n")) {
    const [, op, n] = line.split(" ");
    if (op === "Read") read += Number(n);
    if (op === "Write") write += Number(n);
  }
  return { read, write };
}

function parseIoStat(text: string): { read: number; write: number } {
  let read = 0;
  let write = 0;
  for (const m of text.matchAll(/rbytes=(\d+)/g)) read += Number(m[1]);
  for (const m of text.matchAll(/wbytes=(\d+)/g)) write += Number(m[1]);
  return { read, write };
}

function readText(file: string): string {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

function readNum(file: string): number {
  const n = Number(readText(file).trim());
  return Number.isFinite(n) ? n : 0;
}

function readKey(text: string, key: string): number {
  const m = new RegExp(`^${key} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

function write(file: string, value: string): void {
  fs.writeFileSync(file, value);
}

function tryWrite(file: string, value: string): boolean {
  try {
    fs.writeFileSync(file, value);
    return true;
  } catch {
    return false;
  }
}
