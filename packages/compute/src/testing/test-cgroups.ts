// Tests that start local drivers under their own cgroup prefixes (often with
// a driver killed on purpose) remove those cgroups themselves: a killed
// driver never gets to, and the next driver's close leaves its prefix when a
// sandbox cgroup was still being emptied.
import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { Cgroup, detectCgroups } from "../drivers/local/cgroups.ts";

/**
 * Ends every process left in cgroups whose names start with `prefix` (where
 * the local driver puts its prefix) and removes them, deepest first; returns
 * the directories that could not be removed.
 */
export async function removeTestCgroups(prefix: string): Promise<string[]> {
  const base = detectCgroups(prefix);
  const names = new Set<string>();
  for (const dir of Object.values(base.dirs))
    for (const name of fs.readdirSync(dirname(dir))) if (name.startsWith(prefix)) names.add(name);
  const stays: string[] = [];
  for (const name of names) {
    const dirs: Record<string, string> = {};
    for (const [controller, dir] of Object.entries(base.dirs)) dirs[controller] = join(dirname(dir), name);
    const root = new Cgroup(base.version, dirs);
    for (const child of root.childNames()) await root.child(child).killAll(2000);
    await root.killAll(2000);
    if (!root.removeTreeSync()) stays.push(name);
  }
  return stays;
}
