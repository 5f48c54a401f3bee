// The C programs compute runs beside itself (the sandbox exec helper, the
// egress splice relay) are compiled on the machine at first use, once per
// version of their sources, into a directory only this user can write: a
// binary planted there by anyone else would run as root.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

export interface NativeProgram {
  /** Names the binary (with a hash of its sources). */
  name: string;
  /** Directory of the sources. */
  sourceDir: string;
  /** Files whose content makes the version (.c files are compiled, headers only hashed). */
  sources: string[];
  /** Linker arguments after the sources, e.g. ["-lseccomp"]. */
  libraries?: string[];
  /** What a failed compile's error adds: what the machine lacks and where it comes from. */
  whenCompileFails?: string;
}

/** The private directory compute's binaries are built in (shared by every compute of this user). */
export function nativeBinDir(): string {
  return join(tmpdir(), `platform-compute-bin-${process.getuid?.() ?? 0}`);
}

/**
 * The path of `program` built in `dir`: compiled with $CC (default cc) unless
 * these exact sources are built there already. Concurrent builders each
 * compile to a temporary name and rename, so a half-written binary is never run.
 */
export async function buildNative(program: NativeProgram, dir = nativeBinDir()): Promise<string> {
  const hash = createHash("sha256");
  for (const file of program.sources) hash.update(fs.readFileSync(join(program.sourceDir, file)));
  const binary = join(dir, `${program.name}-${hash.digest("hex").slice(0, 16)}`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? 0) || (st.mode & 0o077) !== 0) {
    throw new Error(`${dir} is not a private directory of this user`);
  }
  if (fs.existsSync(binary)) return binary;
  const tmp = `${binary}.${process.pid}.${Date.now()}.tmp`;
  const sources = program.sources.filter((f) => f.endsWith(".c")).map((f) => join(program.sourceDir, f));
  try {
    await promisify(execFile)(process.env.CC ?? "cc", ["-O2", "-o", tmp, ...sources, ...(program.libraries ?? [])]);
  } catch (err) {
    const first = (err as Error).message.split("\n")[0];
    throw new Error(
      `cannot build ${program.name} (${first})${program.whenCompileFails ? `: ${program.whenCompileFails}` : ""}`,
      {
        cause: err,
      },
    );
  }
  fs.renameSync(tmp, binary);
  return binary;
}
