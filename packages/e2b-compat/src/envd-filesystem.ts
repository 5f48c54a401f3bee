import type { ServiceImpl } from "@connectrpc/connect";
import type { ComputePort } from "./compute-port.ts";
import { Code, PlatformError } from "@platform/errors";
import { randomUUID } from "node:crypto";
import { type Filesystem, FileType } from "@platform/gen/e2b/filesystem/filesystem_pb";
import { envdSandbox } from "./envd-access.ts";
import { HOME, sandboxPath } from "./paths.ts";
import type { SandboxRecords } from "./records.ts";
import { changes, pause, type Snapshot, snapshotOf, WATCH_POLL_MS, type WatchEvent } from "./watch.ts";
import { notFound, WorkspaceOps } from "./workspace-ops.ts";

/** Watchers (CreateWatcher) one sandbox may hold, and the service in all. */
const MAX_WATCHERS_PER_SANDBOX = 64;
const MAX_WATCHERS = 4096;

interface Watcher {
  sandboxId: string;
  dirAbs: string;
  recursive: boolean;
  includeEntry: boolean;
  snapshot: Snapshot;
}

function eventMessage(e: WatchEvent) {
  return { name: e.name, type: e.type, ...(e.entry ? { entry: e.entry } : {}) };
}

/** envd's filesystem.Filesystem over compute's ListFiles and ExecCommand (README: what is served). */
export function filesystemImpl(records: SandboxRecords, compute: ComputePort): ServiceImpl<typeof Filesystem> {
  const ops = new WorkspaceOps(compute);
  const watchers = new Map<string, Watcher>();
  /** The directory to watch, checked: absolute, in the workspace, a directory. */
  const watchedDir = async (sandboxId: string, path: string): Promise<string> => {
    const entry = await ops.stat(sandboxId, path);
    if (entry.type !== FileType.DIRECTORY)
      throw new PlatformError(Code.InvalidArgument, "invalid_argument", `path is not a directory: ${entry.path}`);
    return entry.path;
  };
  const watcherOf = (sandboxId: string, id: string): Watcher => {
    const w = watchers.get(id);
    if (!w || w.sandboxId !== sandboxId)
      throw new PlatformError(Code.NotFound, "not_found", `watcher ${JSON.stringify(id.slice(0, 64))} not found`);
    return w;
  };
  return {
    async stat(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      return { entry: await ops.stat(sb.sandboxId, req.path) };
    },
    async listDir(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const entry = await ops.stat(sb.sandboxId, req.path);
      if (entry.type !== 2)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", `path is not a directory: ${entry.path}`);
      return { entries: await ops.list(sb.sandboxId, req.path, req.depth || 1) };
    },
    async makeDir(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const abs = sandboxPath(req.path);
      if (await ops.exists(sb.sandboxId, abs))
        throw new PlatformError(Code.AlreadyExists, "already_exists", `directory already exists: ${abs}`);
      await ops.run(sb.sandboxId, "mkdir", ["-p", "--", abs]);
      return { entry: await ops.stat(sb.sandboxId, abs) };
    },
    async remove(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const abs = sandboxPath(req.path);
      if (abs === HOME)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", "the workspace root cannot be removed");
      if (!(await ops.exists(sb.sandboxId, abs))) throw notFound(abs);
      await ops.run(sb.sandboxId, "rm", ["-rf", "--", abs]);
      return {};
    },
    async move(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const from = sandboxPath(req.source);
      const to = sandboxPath(req.destination);
      if (from === HOME)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", "the workspace root cannot be moved");
      if (!(await ops.exists(sb.sandboxId, from))) throw notFound(from);
      await ops.run(sb.sandboxId, "mv", ["-T", "--", from, to]);
      return { entry: await ops.stat(sb.sandboxId, to) };
    },
    /**
     * Polled (README): the directory is listed every WATCH_POLL_MS and the
     * listings compared; the stream ends with an error when a listing fails
     * (the directory or the sandbox gone).
     */
    async *watchDir(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const dirAbs = await watchedDir(sb.sandboxId, req.path);
      let snapshot = await snapshotOf(compute, sb.sandboxId, dirAbs, req.recursive);
      yield { event: { case: "start", value: {} } };
      for (;;) {
        await pause(WATCH_POLL_MS, ctx.signal);
        if (ctx.signal.aborted) return;
        const next = await snapshotOf(compute, sb.sandboxId, dirAbs, req.recursive);
        for (const e of changes(snapshot, next, dirAbs, req.includeEntry))
          yield { event: { case: "filesystem", value: eventMessage(e) } };
        snapshot = next;
      }
    },
    async createWatcher(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const dirAbs = await watchedDir(sb.sandboxId, req.path);
      // Those of sandboxes gone (killed, timed out) go first.
      for (const [id, w] of watchers) if (!records.get(w.sandboxId)) watchers.delete(id);
      const mine = [...watchers.values()].filter((w) => w.sandboxId === sb.sandboxId).length;
      if (mine >= MAX_WATCHERS_PER_SANDBOX || watchers.size >= MAX_WATCHERS)
        throw new PlatformError(
          Code.ResourceExhausted,
          "resource_exhausted",
          `at most ${MAX_WATCHERS_PER_SANDBOX} watchers per sandbox (remove one first)`,
        );
      const snapshot = await snapshotOf(compute, sb.sandboxId, dirAbs, req.recursive);
      const watcherId = randomUUID();
      watchers.set(watcherId, {
        sandboxId: sb.sandboxId,
        dirAbs,
        recursive: req.recursive,
        includeEntry: req.includeEntry,
        snapshot,
      });
      return { watcherId };
    },
    /** The changes since the watcher was made or last asked (one listing now). */
    async getWatcherEvents(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const w = watcherOf(sb.sandboxId, req.watcherId);
      const next = await snapshotOf(compute, sb.sandboxId, w.dirAbs, w.recursive);
      const events = changes(w.snapshot, next, w.dirAbs, w.includeEntry);
      w.snapshot = next;
      return { events: events.map(eventMessage) };
    },
    async removeWatcher(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      watcherOf(sb.sandboxId, req.watcherId);
      watchers.delete(req.watcherId);
      return {};
    },
  };
}
