import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { mountPointsUnder } from "../mount-table.ts";

/**
 * Removes a build's scratch tree, never through a mount a stopped (or killed)
 * mmdebstrap left in it: a recursive removal would descend into the host's
 * /dev, /proc or /sys bound there. Those are detached first, deepest first;
 * a tree still holding one is left for the operator. Whether it is gone.
 */
export function removeScratch(dir: string): boolean {
  for (const point of mountPointsUnder(dir).sort((a, b) => b.length - a.length))
    spawnSync("umount", ["--lazy", point], { stdio: "ignore" });
  if (mountPointsUnder(dir).length > 0) return false;
  fs.rmSync(dir, { recursive: true, force: true });
  return true;
}
