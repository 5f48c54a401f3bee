import * as fs from "node:fs";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { FileEntryInfo, ListResult, ReadResult } from "../../driver.ts";
import { PATH_MAX, quotePath } from "../../path-limits.ts";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_APPEND, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = fs.constants;
const MAX_SYMLINK_FOLLOWS = 40;

/**
 * File operations on one sandbox workspace, done by the (root) service on the
 * host directory that is bound at mount_path inside the sandbox.
 *
 * Race-free resolution (path rule 2): the path is walked one component at a
 * time, each step opened with O_NOFOLLOW relative to the directory fd of the
 * previous step (through `/proc/self/fd/<fd>/<name>`, the openat equivalent
 * Node offers). A symlink met on the way is read and resolved by this code,
 * never by the kernel: an absolute target is interpreted in the sandbox's
 * view (it must start with mount_path), a relative one from the directory
 * holding the link, and `..` pops the stack of already-open directory fds,
 * so climbing above the workspace root is detected, not performed. Because
 * every step is relative to an fd we hold, swapping a component for a
 * symlink while the call runs cannot redirect it: the swapped component is
 * either seen as a symlink (and checked) or not seen at all. The final fd is
 * re-verified through /proc/self/fd as a belt-and-braces check.
 *
 * Only synchronous fs calls are used, so no other JS code runs between a
 * step and the next and the fds in the stack cannot be reused meanwhile.
 */
export class WorkspaceFs {
  readonly hostRoot: string;
  readonly mountParts: string[];
  private readonly owner: { uid: number; gid: number } | undefined;

  constructor(hostRoot: string, mountPath: string, owner?: { uid: number; gid: number }) {
    this.hostRoot = fs.realpathSync(hostRoot);
    this.mountParts = mountPath.split("/").filter((p) => p !== "" && p !== ".");
    this.owner = owner;
  }

  read(rel: string, offset: number, maxBytes: number): ReadResult {
    const fd = this.openFinal(rel, "read");
    try {
      const st = fs.fstatSync(fd);
      if (st.isDirectory()) throw invalid(`${quotePath(rel || "/")} is a directory`);
      if (!st.isFile()) throw invalid(`${quotePath(rel)} is not a regular file`);
      const total = st.size;
      const start = Math.min(offset, total);
      const want = Math.max(0, Math.min(maxBytes, total - start));
      const buf = Buffer.allocUnsafe(want);
      let got = 0;
      while (got < want) {
        const n = fs.readSync(fd, buf, got, want - got, start + got);
        if (n === 0) break;
        got += n;
      }
      const data = new Uint8Array(buf.buffer, buf.byteOffset, got);
      return { data, totalSize: total, eof: start + got >= total };
    } finally {
      fs.closeSync(fd);
    }
  }

  write(rel: string, data: Uint8Array, append: boolean, mode: number): number {
    const fd = this.openFinal(rel, append ? "append" : "write", mode);
    const sizeBefore = append ? fs.fstatSync(fd).size : 0;
    try {
      let done = 0;
      while (done < data.length) done += fs.writeSync(fd, data, done, data.length - done, append ? null : done);
      if (!append) fs.ftruncateSync(fd, data.length);
      return done;
    } catch (err) {
      // A write cut short by the workspace's size gives back what it took: an
      // append is undone, an overwrite (whose old bytes are already partly
      // replaced) leaves an empty file, so a failed call never leaves the workspace full.
      if (errCode(err) === "ENOSPC" || errCode(err) === "EDQUOT") {
        try {
          fs.ftruncateSync(fd, sizeBefore);
        } catch {
          // the error below is what the caller needs
        }
      }
      throw mapFsError(err, rel);
    } finally {
      fs.closeSync(fd);
    }
  }

  list(rel: string, recursive: boolean, maxEntries: number): ListResult {
    const stack = this.walk(splitRel(rel), [], false);
    const top = stack.pop() as number;
    closeAll(stack);
    const entries: FileEntryInfo[] = [];
    let truncated = false;
    const visit = (dirFd: number, prefix: string): void => {
      const names = fs.readdirSync(`/proc/self/fd/${dirFd}`).sort();
      for (const name of names) {
        if (truncated) return;
        const p = `/proc/self/fd/${dirFd}/${name}`;
        let st: fs.Stats;
        try {
          st = fs.lstatSync(p);
        } catch {
          continue; // removed while listing
        }
        if (entries.length >= maxEntries) {
          truncated = true;
          return;
        }
        const isDir = st.isDirectory();
        entries.push({
          path: prefix + name,
          size: isDir ? 0 : st.size,
          isDir,
          mode: st.mode & 0o7777,
          modifiedAt: st.mtime,
        });
        // Never descend through a symlink: lstat said directory, and O_NOFOLLOW keeps it so.
        if (recursive && isDir) {
          let child: number;
          try {
            child = fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
          } catch {
            continue;
          }
          try {
            visit(child, `${prefix}${name}/`);
          } finally {
            fs.closeSync(child);
          }
        }
      }
    };
    try {
      this.verifyInside(top);
      visit(top, "");
    } finally {
      fs.closeSync(top);
    }
    return { entries, truncated };
  }

  /**
   * Opens the file named by `rel`, following symlinks only inside the
   * workspace. For writes, missing parent directories are created (owned by
   * the sandbox user) and a new file gets `mode`.
   */
  private openFinal(rel: string, how: "read" | "write" | "append", mode = 0o644): number {
    let parts = splitRel(rel);
    if (parts.length === 0) throw invalid("path names the workspace root, not a file");
    const writing = how !== "read";
    let stack = this.walk(parts.slice(0, -1), [], writing);
    let name = parts.at(-1) as string;
    for (let follows = 0; ; follows++) {
      if (follows > MAX_SYMLINK_FOLLOWS) {
        closeAll(stack);
        throw invalid("too many levels of symbolic links");
      }
      const dirFd = stack.at(-1) as number;
      const p = `/proc/self/fd/${dirFd}/${name}`;
      let fd: number | undefined;
      let created = false;
      try {
        if (!writing) fd = fs.openSync(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        else {
          try {
            fd = fs.openSync(
              p,
              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | (how === "append" ? O_APPEND : 0),
              0o600,
            );
            created = true;
          } catch (err) {
            if (errCode(err) !== "EEXIST") throw err;
            // No O_TRUNC: ext4 flushes a file truncated to 0 on close (auto_da_alloc), ~2 ms a call;
            // write() truncates to the new length afterwards instead.
            fd = fs.openSync(p, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | (how === "append" ? O_APPEND : 0));
          }
        }
      } catch (err) {
        const code = errCode(err);
        if (code === "ELOOP") {
          // The final component is a symlink: resolve its target ourselves.
          const target = readLink(p);
          if (target === undefined) {
            closeAll(stack);
            throw mapFsError(err, rel);
          }
          const targetParts = target.split("/");
          if (target.startsWith("/")) stack = this.restartAtMount(stack, targetParts, rel);
          const last = targetParts.at(-1) ?? "";
          parts = targetParts.slice(0, -1);
          stack = this.walk(parts, stack, writing);
          if (last === "" || last === "." || last === "..") {
            // The link names a directory (`x -> ..`): check where it lands, then refuse.
            stack = this.walk([last], stack, false);
            closeAll(stack);
            throw invalid(`${quotePath(rel)} is a directory`);
          }
          name = last;
          continue;
        }
        closeAll(stack);
        if (code === "EISDIR") throw invalid(`${quotePath(rel)} is a directory`);
        throw mapFsError(err, rel);
      }
      try {
        this.verifyInside(fd, stack.at(-1));
      } catch (err) {
        closeAll(stack);
        fs.closeSync(fd);
        throw err;
      }
      closeAll(stack);
      try {
        const st = fs.fstatSync(fd);
        if (writing && !st.isFile()) throw invalid(`${quotePath(rel)} is not a regular file`);
        if (created) {
          fs.fchmodSync(fd, (mode || 0o644) & 0o1777);
          if (this.owner) fs.fchownSync(fd, this.owner.uid, this.owner.gid);
        }
      } catch (err) {
        fs.closeSync(fd);
        throw err;
      }
      return fd;
    }
  }

  /**
   * Walks `pending` from the directory on top of `stack` (the workspace root
   * when empty), opening each component as a directory with O_NOFOLLOW.
   * Returns the new stack of open directory fds (root first).
   */
  private walk(pending: string[], start: number[], create: boolean): number[] {
    const stack = start.length > 0 ? start : [this.openRoot()];
    const queue = [...pending];
    let follows = 0;
    while (queue.length > 0) {
      const comp = queue.shift() as string;
      if (comp === "" || comp === ".") continue;
      if (comp === "..") {
        if (stack.length === 1) {
          closeAll(stack);
          throw outside();
        }
        fs.closeSync(stack.pop() as number);
        continue;
      }
      const p = `/proc/self/fd/${stack.at(-1)}/${comp}`;
      try {
        stack.push(fs.openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
      } catch (err) {
        const code = errCode(err);
        if (code === "ENOENT" && create) {
          try {
            fs.mkdirSync(p, 0o755);
            if (this.owner) fs.chownSync(p, this.owner.uid, this.owner.gid);
          } catch (mkErr) {
            if (errCode(mkErr) !== "EEXIST") {
              closeAll(stack);
              throw mapFsError(mkErr, comp);
            }
          }
          queue.unshift(comp); // open what we (or a racing writer) made, with the same checks
          continue;
        }
        if (code === "ELOOP" || code === "ENOTDIR") {
          const target = readLink(p);
          if (target === undefined) {
            closeAll(stack);
            throw invalid(`${quotePath(comp)} is not a directory`);
          }
          if (++follows > MAX_SYMLINK_FOLLOWS) {
            closeAll(stack);
            throw invalid("too many levels of symbolic links");
          }
          const targetParts = target.split("/");
          if (target.startsWith("/")) {
            const restarted = this.restartAtMount(stack, targetParts, comp);
            stack.length = 0;
            stack.push(...restarted);
          }
          queue.unshift(...targetParts);
          continue;
        }
        closeAll(stack);
        throw mapFsError(err, comp);
      }
    }
    return stack;
  }

  /**
   * An absolute symlink target is a path in the sandbox's view: it stays in
   * the workspace only if it starts with mount_path. Consumes those leading
   * components from `targetParts` and returns a stack holding just the root.
   */
  private restartAtMount(stack: number[], targetParts: string[], what: string): number[] {
    const parts = targetParts.filter((p) => p !== "" && p !== ".");
    const mount = this.mountParts;
    for (let i = 0; i < mount.length; i++) {
      if (parts[i] !== mount[i]) {
        closeAll(stack);
        throw outside(what);
      }
    }
    targetParts.splice(0, targetParts.length, ...parts.slice(mount.length));
    const root = stack.shift() as number;
    closeAll(stack);
    return [root];
  }

  private openRoot(): number {
    return fs.openSync(this.hostRoot, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  }

  /**
   * Belt and braces: the kernel's name for what we opened must be inside the
   * workspace. `dirFd` is the directory `fd` was opened in, if it is a file.
   */
  private verifyInside(fd: number, dirFd?: number): void {
    let real: string;
    try {
      real = fs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch (err) {
      // The host's name is the workspace's prefixed with hostRoot, so a path
      // that fits PATH_MAX in the sandbox may not here: climb instead.
      if (errCode(err) !== "ENAMETOOLONG") throw err;
      if (!this.reachesRoot(fs.fstatSync(fd).isDirectory() ? fd : dirFd)) throw outside();
      return;
    }
    if (real !== this.hostRoot && !real.startsWith(`${this.hostRoot}/`)) throw outside();
  }

  /** Whether climbing `..` from the directory `dirFd` meets the workspace root (compared by device and inode). */
  private reachesRoot(dirFd: number | undefined): boolean {
    if (dirFd === undefined) return false;
    const root = fs.statSync(this.hostRoot, { bigint: true });
    let current = dirFd;
    try {
      // A path within PATH_MAX has at most PATH_MAX / 2 components, plus the host's own.
      for (let depth = 0; depth <= PATH_MAX; depth++) {
        const st = fs.fstatSync(current, { bigint: true });
        if (st.dev === root.dev && st.ino === root.ino) return true;
        const parent = fs.openSync(`/proc/self/fd/${current}/..`, O_RDONLY | O_DIRECTORY);
        if (current !== dirFd) fs.closeSync(current);
        current = parent;
        const up = fs.fstatSync(current, { bigint: true });
        if (up.dev === st.dev && up.ino === st.ino) return false; // the filesystem's root
      }
      return false;
    } finally {
      if (current !== dirFd) fs.closeSync(current);
    }
  }
}

function splitRel(rel: string): string[] {
  return rel.split("/").filter((p) => p !== "" && p !== ".");
}

function readLink(p: string): string | undefined {
  try {
    return fs.readlinkSync(p);
  } catch {
    return undefined;
  }
}

function closeAll(fds: number[]): void {
  for (const fd of fds) {
    try {
      fs.closeSync(fd);
    } catch {
      // already closed
    }
  }
  fds.length = 0;
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}

function outside(what?: string): PlatformError {
  return PlatformError.permissionDenied(
    what ? `symlink ${JSON.stringify(what)} resolves outside the workspace` : "path resolves outside the workspace",
    ComputeReason.symlinkOutside,
  );
}

function mapFsError(err: unknown, rel: string): PlatformError {
  if (err instanceof PlatformError) return err;
  switch (errCode(err)) {
    case "ENOENT":
      return PlatformError.notFound(`${quotePath(rel)} does not exist`, "not_found");
    case "ENOTDIR":
      return invalid(`a component of ${quotePath(rel)} is not a directory`);
    case "EISDIR":
      return invalid(`${quotePath(rel)} is a directory`);
    case "ENXIO":
    case "EAGAIN":
      return invalid(`${quotePath(rel)} is not a regular file`);
    case "ENAMETOOLONG":
      return invalid("path too long");
    case "EACCES":
    case "EPERM":
      return PlatformError.permissionDenied(`${quotePath(rel)}: permission denied`);
    case "ENOSPC":
    case "EDQUOT":
      return new PlatformError(
        Code.ResourceExhausted,
        ComputeReason.workspaceFull,
        "the workspace is full: its size limit is reached",
      );
    default:
      return PlatformError.internal("workspace I/O failed", err);
  }
}
