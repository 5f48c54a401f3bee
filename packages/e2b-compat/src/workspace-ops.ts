import { posix } from "node:path";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type ComputePort, type FileEntry, MAX_LIST_ENTRIES } from "./compute-port.ts";
import { Code, PlatformError } from "@platform/errors";
import { type EntryInfo, FileType } from "@platform/gen/e2b/filesystem/filesystem_pb";
import { HOME, sandboxPath } from "./paths.ts";

type Entry = Omit<EntryInfo, "$typeName" | "modifiedTime"> & { modifiedTime?: ReturnType<typeof timestampFromDate> };

function permissions(mode: number, isDir: boolean): string {
  const bits = ["r", "w", "x"];
  let s = isDir ? "d" : "-";
  for (let i = 8; i >= 0; i--) s += mode & (1 << i) ? bits[(8 - i) % 3] : "-";
  return s;
}

/** A compute FileEntry (relative to `dirAbs`) as envd's EntryInfo. */
export function entryOf(dirAbs: string, e: FileEntry): Entry {
  const path = posix.join(dirAbs, e.path);
  return {
    name: posix.basename(path),
    type: e.isDir ? FileType.DIRECTORY : FileType.FILE,
    path,
    size: BigInt(e.size),
    mode: e.mode | (e.isDir ? 0o40000 : 0),
    permissions: permissions(e.mode, e.isDir),
    owner: "user",
    group: "user",
    modifiedTime: timestampFromDate(e.modifiedAt),
    metadata: {},
  };
}

/**
 * The filesystem calls envd has and compute has not (stat, make dir, remove,
 * rename) on compute's ListFiles and ExecCommand: the same sandbox, the same
 * path rule (paths inside the workspace, mounted at HOME).
 */
export class WorkspaceOps {
  constructor(private readonly compute: ComputePort) {}

  async list(sandboxId: string, path: string, depth: number): Promise<Entry[]> {
    const dirAbs = sandboxPath(path);
    const res = await this.compute.listFiles(sandboxId, dirAbs, depth > 1, MAX_LIST_ENTRIES);
    return res.entries.filter((e) => e.path.split("/").length <= Math.max(1, depth)).map((e) => entryOf(dirAbs, e));
  }

  async stat(sandboxId: string, path: string): Promise<Entry> {
    const abs = sandboxPath(path);
    if (abs === HOME) {
      return {
        name: "user",
        type: FileType.DIRECTORY,
        path: HOME,
        size: 0n,
        mode: 0o40755,
        permissions: "drwxr-xr-x",
        owner: "user",
        group: "user",
        metadata: {},
      };
    }
    const parent = posix.dirname(abs);
    const name = posix.basename(abs);
    let entries: FileEntry[];
    try {
      entries = (await this.compute.listFiles(sandboxId, parent, false, MAX_LIST_ENTRIES)).entries;
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.NotFound) throw notFound(abs);
      throw err;
    }
    const e = entries.find((x) => x.path === name);
    if (!e) throw notFound(abs);
    return entryOf(parent, e);
  }

  async exists(sandboxId: string, path: string): Promise<boolean> {
    try {
      await this.stat(sandboxId, path);
      return true;
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.NotFound) return false;
      throw err;
    }
  }

  /** Runs one command in the sandbox; a non-zero exit is an error carrying its stderr. */
  async run(sandboxId: string, command: string, args: string[]): Promise<void> {
    let stderr = "";
    let exitCode = -1;
    for await (const ev of this.compute.exec({ sandboxId, command, args, env: {}, timeoutMs: 60_000 })) {
      if (ev.type === "stderr") stderr += new TextDecoder().decode(ev.data);
      if (ev.type === "completed") exitCode = ev.exitCode;
    }
    if (exitCode !== 0)
      throw new PlatformError(
        Code.Internal,
        "command_failed",
        `${command} failed (exit ${exitCode}): ${stderr.trim().slice(0, 500)}`,
      );
  }
}

export function notFound(abs: string): PlatformError {
  return new PlatformError(Code.NotFound, "not_found", `no such file or directory: ${abs}`);
}
