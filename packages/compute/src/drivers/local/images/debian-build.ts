import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { PlatformError } from "@platform/errors";
import { parseImageRef } from "./image-ref.ts";
import type { ImageStore, StoredImage } from "./image-store.ts";

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
    await run(MMDEBSTRAP, args, b.onProgress);
    return await store.adopt(root, b.name, `debian ${suite} ${b.packages.join(",")}`.trim(), inUse);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

function run(cmd: string, args: string[], onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C.UTF-8" } });
    let tail = "";
    const take = (d: Buffer) => {
      const text = d.toString();
      tail = (tail + text).slice(-2000);
      for (const line of text.split("\n")) if (line.trim()) onLine?.(line.trim());
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(PlatformError.internal(`mmdebstrap failed (exit ${code}): ${tail.slice(-500)}`)),
    );
  });
}
