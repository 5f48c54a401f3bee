import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { Cgroup, type CgroupLimits, type CgroupStats } from "./cgroups.ts";
import { readJson, type SandboxLayout, writeJson } from "./sandbox-layout.ts";

/**
 * The spare launcher's cgroup (launch.ts): made beside the sandboxes' when
 * the spare is started, the spare moved into it there, off any resume's
 * path. `.spare-<pid>-<n>`: no sandbox id starts with a dot, and the pid
 * tells whose it is.
 */
export const SPARE_CGROUP_PREFIX = ".spare-";
/** A released sandbox's cgroup once a spare's took its place: removed right after, or by the housekeeping. */
export const RETIRED_CGROUP_PREFIX = ".retired-";
/** The exec cgroup made inside a spare's, ahead: the resumed sandbox's first exec runs in it. */
export const SPARE_EXEC_CGROUP = "exec-0";

/**
 * A sandbox's counters from its cgroups before the current one (a released
 * sandbox resumed into a spare's cgroup starts from zero there): its usage
 * adds them, so it never goes down. Kept in `<sandbox dir>/cgroup-base.json`
 * with the inode of the cgroup they lead to (its pids, or only, directory)
 * and, once that one is released, its own final counters (a released
 * sandbox's empty cgroup is removed by the next service's housekeeping and
 * made again: its counters would be lost). Before a swap it also holds the
 * inode of the cgroup being replaced and the base before it: written before
 * the cgroups are renamed, it is right whether a crash came before the swap
 * (the sandbox's cgroup is still the replaced one: `prev`) or after (the one
 * it leads to: `base`); a cgroup made again since: `base` and its `final`.
 */
interface CgroupBaseFile {
  base?: CgroupStats;
  inode: number;
  final?: CgroupStats;
  prev?: CgroupStats;
  replaced?: number;
}

const BASE_FILE = "cgroup-base.json";

/** The counters of cgroup's predecessors for the sandbox laid out at layout (undefined: none). */
export function readCgroupBase(layout: Pick<SandboxLayout, "dir">, cgroup: Cgroup): CgroupStats | undefined {
  const file = readJson<CgroupBaseFile>(join(layout.dir, BASE_FILE));
  if (!file) return undefined;
  const inode = cgroupInode(cgroup);
  if (inode === file.inode) return file.base;
  if (file.replaced !== undefined && inode === file.replaced) return file.prev;
  return file.final ? addStats(file.base, file.final) : file.base;
}

/**
 * A sandbox's processes were ended (released): its cgroup's counters are
 * final, and kept with its base, for a service after a restart that finds
 * the cgroup made again.
 */
export function recordReleased(live: Pick<Swappable, "layout" | "cgroup" | "cgroupBase">): void {
  const inode = cgroupInode(live.cgroup);
  if (!inode) return;
  writeJson(join(live.layout.dir, BASE_FILE), {
    base: live.cgroupBase,
    inode,
    final: live.cgroup.stats(),
  } satisfies CgroupBaseFile);
}

/** The inode of cgroup's pids (or only) directory; 0 when it does not exist. */
export function cgroupInode(cgroup: Cgroup): number {
  const dir = cgroup.dirs.pids ?? cgroup.dirs.unified ?? Object.values(cgroup.dirs)[0];
  return (dir && fs.statSync(dir, { throwIfNoEntry: false })?.ino) || 0;
}

/** a + b: the counters summed, the peak the larger; b's current figures (nothing runs in a). */
export function addStats(a: CgroupStats | undefined, b: CgroupStats): CgroupStats {
  if (!a) return { ...b };
  return {
    cpuNs: a.cpuNs + b.cpuNs,
    memoryBytes: b.memoryBytes,
    memoryPeakBytes: Math.max(a.memoryPeakBytes, b.memoryPeakBytes),
    ioReadBytes: a.ioReadBytes + b.ioReadBytes,
    ioWriteBytes: a.ioWriteBytes + b.ioWriteBytes,
    oomKills: a.oomKills + b.oomKills,
    pids: b.pids,
  };
}

/** What the swap touches of a released sandbox. */
export interface Swappable {
  spec: { sandboxId: string };
  layout: Pick<SandboxLayout, "dir">;
  cgroup: Cgroup;
  cgroupBase?: CgroupStats;
}

/**
 * A released sandbox takes the spare launcher's cgroup as its own: its
 * cgroup (empty, its processes ended) is renamed away and the spare's is
 * renamed to its name, in each hierarchy, and given the limits a create
 * gives (limits; made by the same mkdir, frozen in none). The launcher is
 * then in the sandbox's cgroup without being moved (a move waits for an RCU
 * grace period after a quiet spell: 5-15 ms here). The counters of the cgroup
 * renamed away are added to the sandbox's base (persisted first). Returns
 * the cgroup renamed away (to be removed), or throws with everything it
 * renamed put back where it could be.
 */
export function swapIntoSpare(live: Swappable, spare: Cgroup, limits: CgroupLimits, retiredName: string): Cgroup {
  const old = live.cgroup;
  const before = old.exists() ? old.stats() : undefined;
  const base = before ? addStats(live.cgroupBase, before) : live.cgroupBase;
  const inode = cgroupInode(spare);
  if (!inode) throw new Error("the spare cgroup is gone");
  writeJson(join(live.layout.dir, BASE_FILE), {
    base,
    inode,
    prev: live.cgroupBase,
    replaced: cgroupInode(old),
  } satisfies CgroupBaseFile);
  const done: Array<[string, string]> = [];
  const rename = (from: string, to: string) => {
    fs.renameSync(from, to);
    done.push([from, to]);
  };
  const dirs: Record<string, string> = {};
  const retired: Record<string, string> = {};
  const seen = new Map<string, string>();
  // The pids directory last: its inode is what says the swap happened (readCgroupBase).
  const keys = Object.keys(old.dirs).sort((a, b) => Number(a === "pids") - Number(b === "pids"));
  try {
    for (const k of keys) {
      const own = old.dirs[k] as string;
      const from = spare.dirs[k];
      if (!from || dirname(from) !== dirname(own)) throw new Error(`the spare cgroup has no ${k} directory beside it`);
      const to = join(dirname(own), retiredName);
      retired[k] = to;
      dirs[k] = own;
      if (seen.has(own)) continue; // v2: one directory for all
      seen.set(own, to);
      try {
        rename(own, to);
      } catch (err) {
        // Something removed it (made again by a start otherwise): nothing to keep.
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
      rename(from, own);
    }
    const renamed = new Cgroup(old.version, dirs);
    renamed.applyLimits(limits);
    live.cgroup = renamed;
    live.cgroupBase = base;
    return new Cgroup(old.version, retired);
  } catch (err) {
    for (const [from, to] of done.reverse()) {
      try {
        fs.renameSync(to, from);
      } catch {
        // left as it is: a start makes what is missing, the housekeeping removes the rest
      }
    }
    live.cgroupBase = readCgroupBase(live.layout, live.cgroup);
    throw err;
  }
}
