import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { now } from "./stats.ts";

/**
 * A bare bubblewrap sandbox like the local driver's (every namespace new,
 * read-only /usr and system dirs, own /proc /dev /tmp) running one command:
 * what a sandbox costs before any service is involved.
 */
export function bareBwrapArgs(): string[] {
  const args = ["--unshare-all", "--new-session", "--die-with-parent", "--ro-bind", "/usr", "/usr"];
  for (const name of ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]) {
    const host = `/${name}`;
    try {
      const st = fs.lstatSync(host);
      if (st.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(host), host);
      else if (st.isDirectory()) args.push("--ro-bind", host, host);
    } catch {
      // absent on this host
    }
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  return args;
}

/** Spawns `bwrap ... command args`; resolves with ns to the first stdout byte and to exit. */
export function bwrapRun(
  command: string,
  args: string[],
): Promise<{ firstByteNs: number; totalNs: number; bytes: number }> {
  return spawnTimed("/usr/bin/bwrap", [...bareBwrapArgs(), command, ...args]);
}

export function spawnTimed(
  command: string,
  args: string[],
): Promise<{ firstByteNs: number; totalNs: number; bytes: number }> {
  const t0 = now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "inherit"] });
    let first = Number.NaN;
    let bytes = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      if (bytes === 0) first = Number(now() - t0);
      bytes += chunk.length;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`${command} exited with ${code}`));
      else resolve({ firstByteNs: first, totalNs: Number(now() - t0), bytes });
    });
  });
}
