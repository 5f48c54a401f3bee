import { EventType } from "@platform/gen/e2b/filesystem/filesystem_pb";
import { type ComputePort, type FileEntry, MAX_LIST_ENTRIES } from "./compute-port.ts";
import { entryOf } from "./workspace-ops.ts";

/** How often a watched directory is listed (one compute ListFiles each time). */
export const WATCH_POLL_MS = 500;

/** What a listing showed of each path (relative to the watched directory). */
export type Snapshot = Map<string, FileEntry>;

/** One change between two listings, as envd's FilesystemEvent carries it. */
export interface WatchEvent {
  /** Relative to the watched directory. */
  name: string;
  type: EventType;
  entry?: ReturnType<typeof entryOf>;
}

export async function snapshotOf(
  compute: ComputePort,
  sandboxId: string,
  dirAbs: string,
  recursive: boolean,
): Promise<Snapshot> {
  const res = await compute.listFiles(sandboxId, dirAbs, recursive, MAX_LIST_ENTRIES);
  return new Map(res.entries.map((e) => [e.path, e]));
}

/**
 * The changes from one listing to the next: new paths are CREATE, gone ones
 * REMOVE (a rename is both), a file whose size or modification time changed
 * WRITE, a mode change CHMOD. Removals first, then the rest in path order.
 */
export function changes(before: Snapshot, after: Snapshot, dirAbs: string, includeEntry: boolean): WatchEvent[] {
  const out: WatchEvent[] = [];
  const entry = (e: FileEntry) => (includeEntry ? { entry: entryOf(dirAbs, e) } : {});
  for (const [name, e] of before) if (!after.has(name)) out.push({ name, type: EventType.REMOVE, ...entry(e) });
  for (const name of [...after.keys()].sort()) {
    const now = after.get(name) as FileEntry;
    const was = before.get(name);
    if (!was || was.isDir !== now.isDir) {
      if (was) out.push({ name, type: EventType.REMOVE, ...entry(was) });
      out.push({ name, type: EventType.CREATE, ...entry(now) });
    } else {
      if (!now.isDir && (was.size !== now.size || was.modifiedAt.getTime() !== now.modifiedAt.getTime()))
        out.push({ name, type: EventType.WRITE, ...entry(now) });
      if (was.mode !== now.mode) out.push({ name, type: EventType.CHMOD, ...entry(now) });
    }
  }
  return out;
}

/** Resolves after ms, or at once when signal aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
