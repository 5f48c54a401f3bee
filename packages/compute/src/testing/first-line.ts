import type { ChildProcessByStdio } from "node:child_process";
import type { Readable } from "node:stream";

/**
 * The first line a child process prints on stdout: how a test's "service"
 * process (a driver in a child it can kill -9) reports what it made.
 * Rejects with `what` if the child exits first.
 */
export function firstLine(child: ChildProcessByStdio<null, Readable, null>, what: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("\n")) resolve(out.slice(0, out.indexOf("\n")));
    });
    child.once("exit", (c) => reject(new Error(`${what}: the child exited ${c} first`)));
  });
}
