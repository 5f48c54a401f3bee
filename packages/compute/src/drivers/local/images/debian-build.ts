import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { PlatformError } from "@platform/errors";
import { parseImageRef } from "./image-ref.ts";
import type { ImageStore, StoredImage } from "./image-store.ts";
import { removeScratch } from "./scratch.ts";

const PACKAGE = /^[a-z0-9][a-z0-9+.-]{0,99}$/;
const SUITE = /^[a-z]{2,20}$/;
export const MMDEBSTRAP = "/usr/bin/mmdebstrap";

export interface DebianBuild {
  name: string;
  /** Debian package names installed on top of the `apt` variant (a shell, coreutils, apt). */
  packages: string[];
  /** Debian suite; default bookworm. */
  suite?: string;
  /** Debian mirror URL; default mmdebstrap's (deb.debian.org). */
  mirror?: string;
  /** One line per step of mmdebstrap's output, for a progress display. */
  onProgress?: (line: string) => void;
  /** Ends the build (mmdebstrap is killed, nothing is stored). */
  signal?: AbortSignal;
  /** Runs mmdebstrap at a lower CPU priority (nice 10): a build in the background of a serving platform. */
  background?: boolean;
}

/** Whether builds can run here: mmdebstrap installed (scripts/setup.sh installs it) and running as root. */
export function debianBuildAvailable(): string | undefined {
  if (!fs.existsSync(MMDEBSTRAP)) return `${MMDEBSTRAP} is not installed (apt-get install mmdebstrap)`;
  if (process.getuid?.() !== 0) return "building an image needs root (mmdebstrap --mode=root)";
  return undefined;
}

/** Checks a build request; INVALID_ARGUMENT naming the bad package or suite. */
export function validateBuild(b: Pick<DebianBuild, "name" | "packages" | "suite" | "mirror">): void {
  parseImageRef(b.name);
  if (b.packages.length > 200) throw PlatformError.invalidArgument("packages: at most 200");
  for (const p of b.packages)
    if (!PACKAGE.test(p))
      throw PlatformError.invalidArgument(`packages: ${JSON.stringify(p.slice(0, 100))} is not a Debian package name`);
  if (b.suite !== undefined && b.suite !== "" && !SUITE.test(b.suite))
    throw PlatformError.invalidArgument(`suite: ${JSON.stringify(b.suite.slice(0, 100))} is not a Debian suite name`);
  if (b.mirror !== undefined && b.mirror !== "" && !/^https?:\/\/[^\s'"]+$/.test(b.mirror))
    throw PlatformError.invalidArgument("mirror: must be an http(s) URL");
}

/**
 * Builds a Debian root filesystem with mmdebstrap (variant `apt`, plus the
 * packages) from Debian's mirror and stores it as `name`. Minutes, mostly
 * downloads; the tree is checked and digested like an import.
 */
export async function buildDebianImage(
  store: ImageStore,
  b: DebianBuild,
  inUse?: () => Set<string>,
): Promise<StoredImage> {
  validateBuild(b);
  const unavailable = debianBuildAvailable();
  if (unavailable)
    throw PlatformError.failedPrecondition(`images cannot be built here: ${unavailable}`, "image_build_unavailable");
  const scratch = store.scratch();
  const root = join(scratch, "rootfs");
  const suite = b.suite || "bookworm";
  try {
    const args = ["--mode=root", "--variant=apt", "--format=directory"];
    if (b.packages.length > 0) args.push(`--include=${b.packages.join(",")}`);
    args.push(suite, root);
    if (b.mirror) args.push(b.mirror);
    await run(MMDEBSTRAP, args, b);
    return await store.adopt(root, b.name, `debian ${suite} ${b.packages.join(",")}`.trim(), inUse);
  } finally {
    removeScratch(scratch);
  }
}

function run(cmd: string, args: string[], b: DebianBuild): Promise<void> {
  const onLine = b.onProgress;
  return new Promise((resolve, reject) => {
    b.signal?.throwIfAborted();
    const [file, argv] = b.background ? ["nice", ["-n", "10", cmd, ...args]] : [cmd, args];
    // Its own process group: mmdebstrap forks (apt, dpkg, its own helpers carrying the same
    // arguments), and a stop is over only when every one of them has gone.
    const child = spawn(file, argv, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_ALL: "C.UTF-8" },
      detached: true,
    });
    let tail = "";
    const take = (d: Buffer) => {
      const text = d.toString();
      tail = (tail + text).slice(-2000);
      for (const line of text.split("\n")) if (line.trim()) onLine?.(line.trim());
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    // TERM, not KILL: mmdebstrap then unmounts what it mounted in the tree (proc, sys, dev).
    const stop = () => signalGroup(child.pid, "SIGTERM");
    b.signal?.addEventListener("abort", stop, { once: true });
    child.on("error", (err) => {
      b.signal?.removeEventListener("abort", stop);
      reject(err);
    });
    child.on("exit", (code) => {
      b.signal?.removeEventListener("abort", stop);
      if (!b.signal?.aborted) {
        if (code === 0) resolve();
        else reject(PlatformError.internal(`mmdebstrap failed (exit ${code}): ${tail.slice(-500)}`));
        return;
      }
      // The caller removes the scratch tree next: wait for the whole group, KILL what ignores TERM.
      groupGone(child.pid, 30_000).then(() => reject(b.signal?.reason));
    });
  });
}

function signalGroup(pid: number | undefined, signal: NodeJS.Signals | 0): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false; // ESRCH: no process is left in the group
  }
}

async function groupGone(pid: number | undefined, patienceMs: number): Promise<void> {
  const until = Date.now() + patienceMs;
  while (signalGroup(pid, 0)) {
    if (Date.now() > until) {
      signalGroup(pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 500));
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
