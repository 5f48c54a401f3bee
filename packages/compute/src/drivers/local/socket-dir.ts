import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processStartTime } from "./sandbox-layout.ts";

/** Name prefix of the exec helper's private socket directories under the temp directory. */
const PREFIX = "platform-compute-exec-";
/** `<PREFIX><pid>-<start time>-<random>`: who made it, so a sweep can tell a dead owner. */
const OWNED = /^platform-compute-exec-(\d+)-(\d+)-[^/]+$/;
/** A directory of an older version (no owner in its name) younger than this may be in the middle of its listen. */
const LEGACY_MIN_AGE_MS = 60_000;

/** A fresh root-only directory for this process's stream socket, named by its owner. */
export function makeSocketDir(dir = tmpdir()): string {
  const made = fs.mkdtempSync(join(dir, `${PREFIX}${process.pid}-${processStartTime(process.pid)}-`));
  fs.chmodSync(made, 0o700);
  return made;
}

/**
 * Removes the socket directories that services killed before their cleanup
 * left in the temp directory (one per start of a killed service). Only ours:
 * directories (never links) named by our prefix, owned by this uid; and only
 * dead owners: the pid in the name no longer runs with the start time in it,
 * or, for a directory of an older version without them, no process listens
 * on its socket (/proc/net/unix) and it is older than a minute. Returns the
 * directories removed.
 */
export function removeStaleSocketDirs(dir = tmpdir()): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((n) => n.startsWith(PREFIX));
  } catch {
    return [];
  }
  const uid = process.getuid?.() ?? 0;
  let listening: Set<string> | undefined;
  const removed: string[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const st = fs.lstatSync(path, { throwIfNoEntry: false });
    if (!st?.isDirectory() || st.uid !== uid) continue;
    const owned = OWNED.exec(name);
    let dead: boolean;
    if (owned) {
      dead = processStartTime(Number(owned[1])) !== owned[2];
    } else {
      listening ??= listeningUnixSockets();
      dead = Date.now() - st.mtimeMs > LEGACY_MIN_AGE_MS && !listening.has(join(path, "streams.sock"));
    }
    if (!dead) continue;
    try {
      // rm does not follow links inside it.
      fs.rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // someone else removed it, or it is not ours to remove after all
    }
  }
  return removed;
}

/** Paths of the unix sockets some process of this host has bound (the last column of /proc/net/unix). */
function listeningUnixSockets(): Set<string> {
  const out = new Set<string>();
  try {
    for (const line of fs.readFileSync("/proc/net/unix", "utf8").split("\n").slice(1)) {
      const path = line.trim().split(/\s+/)[7];
      if (path?.startsWith("/")) out.add(path);
    }
  } catch {
    // no procfs: nothing counts as listening, age alone decides
  }
  return out;
}
