import * as fs from "node:fs";
import { join } from "node:path";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { SandboxLayout } from "./sandbox-layout.ts";

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

/** Physically removes expired soft-deleted workspaces (the whole sandbox directory). */
export async function collectExpiredWorkspaces(dataDir: string, now: Date): Promise<string[]> {
  const removed: string[] = [];
  for (const id of listExpiredWorkspaces(dataDir, now)) {
    // rm does not follow symlinks, so a link planted in a workspace cannot widen the deletion.
    await fs.promises.rm(new SandboxLayout(dataDir, id).dir, { recursive: true, force: true });
    removed.push(id);
  }
  return removed;
}
