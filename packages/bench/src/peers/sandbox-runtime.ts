import { spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SandboxManager } from "@anthropic-ai/sandbox-runtime";
import { now } from "../stats.ts";

const VERSION = (
  JSON.parse(readFileSync(new URL(import.meta.resolve("@anthropic-ai/sandbox-runtime/package.json")), "utf8")) as {
    version: string;
  }
).version;

/** "sandbox-runtime 0.0.83": the peer's name in the report, with the pinned version. */
export const SANDBOX_RUNTIME = `Anthropic sandbox-runtime ${VERSION}`;

/**
 * Anthropic's sandbox-runtime (`srt`) used as its README says a library user
 * does: `SandboxManager.initialize` once (it starts its HTTP and SOCKS
 * proxies; on Linux the sandbox has no network namespace of its own but the
 * proxies' Unix sockets, bridged by socat), then per command
 * `wrapWithSandbox(command)` (builds the bubblewrap argv; on Linux scans the
 * working directory with ripgrep for files it must protect) and a spawn of
 * the wrapped string through the shell. The configuration is the closest to
 * a platform sandbox: no network allowed, its working directory (an empty
 * workspace of its own) writable, reads elsewhere as srt allows by default.
 * srt keeps its state in a process-wide singleton: one instance at a time.
 */
export class SandboxRuntimePeer {
  private constructor(readonly workspace: string) {}

  static async start(dir: string): Promise<SandboxRuntimePeer> {
    const workspace = join(dir, "srt-workspace");
    mkdirSync(workspace, { recursive: true });
    const deps = SandboxManager.checkDependencies();
    if (deps.errors.length > 0) throw new Error(`sandbox-runtime cannot run here: ${deps.errors.join(", ")}`);
    await SandboxManager.initialize({
      network: { allowedDomains: [], deniedDomains: [] },
      filesystem: { denyRead: [], allowWrite: [workspace], denyWrite: [] },
    });
    return new SandboxRuntimePeer(workspace);
  }

  /** Wraps and runs `command` in a new srt sandbox; ns from the wrap call to the first stdout byte and to exit. */
  async run(command: string, expect: string): Promise<{ firstByteNs: number; totalNs: number }> {
    const t0 = now();
    const wrapped = await SandboxManager.wrapWithSandbox(command);
    try {
      return await new Promise((resolve, reject) => {
        const child = spawn(wrapped, { shell: true, cwd: this.workspace, stdio: ["ignore", "pipe", "pipe"] });
        let first = Number.NaN;
        let out = "";
        let err = "";
        child.stdout.on("data", (chunk: Buffer) => {
          if (out === "") first = Number(now() - t0);
          out += chunk.toString();
        });
        child.stderr.on("data", (chunk: Buffer) => {
          err += chunk.toString();
        });
        child.on("error", reject);
        child.on("close", (code) => {
          if (code !== 0 || out !== expect)
            reject(new Error(`srt \`${command}\`: exit ${code}, stdout ${JSON.stringify(out)} ${err.slice(0, 300)}`));
          else resolve({ firstByteNs: first, totalNs: Number(now() - t0) });
        });
      });
    } finally {
      // What the README asks after each command (removes mount points made for it).
      SandboxManager.cleanupAfterCommand();
    }
  }

  async close(): Promise<void> {
    await SandboxManager.reset();
  }
}
