import * as fs from "node:fs";
import { join } from "node:path";
import { mountPointsUnder } from "./mount-table.ts";
import { deleteAfterOf } from "./session-workspace.ts";
import { releaseImages } from "./workspace-image.ts";

/** How a session workspace is named among the ids GC returns (sandbox ids are plain UUIDs). */
export const SESSION_PREFIX = "session:";

export interface Expired {
  /** A sandbox id, or `session:<key>` for a session's workspace. */
  name: string;
  dir: string;
  /** Set for a session's workspace. */
  workspaceKey?: string;
}

/**
 * What is soft-deleted under dataDir with a delete-after at or before `now`:
 * sandbox directories (by id) and session workspaces no sandbox has used
 * within the grace (`session:<tenant>_<session>`).
 */
export function expiredWorkspaces(dataDir: string, now: Date): Expired[] {
  const out: Expired[] = [];
  for (const under of ["sandboxes", "workspaces"]) {
    let entries: string[] = [];
    try {
      entries = fs.readdirSync(join(dataDir, under));
    } catch {
      continue;
    }
    for (const entry of entries) {
      const dir = join(dataDir, under, entry);
      // Live sandboxes and workspaces in use carry no mark and are never collected.
      const after = deleteAfterOf(dir);
      if (!after || after.getTime() > now.getTime()) continue;
      out.push(
        under === "sandboxes" ? { name: entry, dir } : { name: `${SESSION_PREFIX}${entry}`, dir, workspaceKey: entry },
      );
    }
  }
  return out;
}

export function listExpiredWorkspaces(dataDir: string, now: Date): string[] {
  return expiredWorkspaces(dataDir, now).map((e) => e.name);
}

/**
 * Physically removes one expired directory (a workspace image with it),
 * reading its mark again first. A workspace still mounted (a destroy that
 * could not unmount, a crash in between) is unmounted and its loop devices
 * detached first; one that stays mounted is left for the next run. Returns
 * whether it was removed.
 */
export async function collectExpired(dir: string, now: Date): Promise<boolean> {
  const after = deleteAfterOf(dir);
  if (!after || after.getTime() > now.getTime()) return false;
  try {
    await releaseImages(dir);
  } catch {
    return false;
  }
  if (mountPointsUnder(dir).length > 0) return false;
  // rm does not follow symlinks, so a link planted in a workspace cannot widen the deletion.
  await fs.promises.rm(dir, { recursive: true, force: true });
  return true;
}

/**
 * Removes every expired sandbox directory and session workspace under
 * dataDir (the compute-gc command; a running service collects through its
 * driver, which also spares a workspace a sandbox has just taken up again).
 */
export async function collectExpiredWorkspaces(dataDir: string, now: Date): Promise<string[]> {
  const removed: string[] = [];
  for (const found of expiredWorkspaces(dataDir, now))
    if (await collectExpired(found.dir, now)) removed.push(found.name);
  return removed;
}
