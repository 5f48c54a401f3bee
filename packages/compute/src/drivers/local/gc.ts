import * as fs from "node:fs";
import { join } from "node:path";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { SandboxLayout } from "./sandbox-layout.ts";
import { mountPointsUnder } from "./mount-table.ts";
import { releaseImages } from "./workspace-image.ts";

/** Ids of soft-deleted sandboxes under dataDir whose delete-after is at or before `now`. */
export function listExpiredWorkspaces(dataDir: string, now: Date): string[] {
  let names: string[] = [];
  try {
    names = fs.readdirSync(join(dataDir, "sandboxes"));
  } catch {
    return [];
  }
  return names.filter((id) => {
    const after = new SandboxLayout(dataDir, id).readAnnotations()?.[DELETE_AFTER_KEY];
    if (!after) return false; // live or failed sandboxes are never collected
    const when = Date.parse(after);
    return !Number.isNaN(when) && when <= now.getTime();
  });
}

/**
 * Physically removes expired soft-deleted workspaces (the whole sandbox
 * directory, its workspace image included). A workspace still mounted (a
 * destroy that could not unmount, a crash in between) is unmounted and its
 * loop devices detached first; one that stays mounted is left for the next run.
 */
export async function collectExpiredWorkspaces(dataDir: string, now: Date): Promise<string[]> {
  const removed: string[] = [];
  for (const id of listExpiredWorkspaces(dataDir, now)) {
    const { dir } = new SandboxLayout(dataDir, id);
    try {
      await releaseImages(dir);
    } catch {
      continue;
    }
    if (mountPointsUnder(dir).length > 0) continue;
    // rm does not follow symlinks, so a link planted in a workspace cannot widen the deletion.
    await fs.promises.rm(dir, { recursive: true, force: true });
    removed.push(id);
  }
  return removed;
}
