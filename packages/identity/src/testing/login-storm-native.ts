// The login storm's C client (login-storm-client.c) built with cc, once per
// version of its source, into a directory only this user can write; and the
// storm of one such process. Its connections cost the machine little CPU
// beside the server's (one epoll loop, no HTTP library), so what a storm's
// clients see is the server's time, not their own.
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const SOURCE = fileURLToPath(new URL("./login-storm-client.c", import.meta.url));

/** One login's answer, as login-storm-client.mjs prints it. */
export type StormAnswer = { status: number; retryAfter?: string | null; ms: number; error?: string };

/** The built client's path, or undefined when this machine has no C compiler ($CC, default cc). */
export async function buildStormClient(): Promise<string | undefined> {
  const source = fs.readFileSync(SOURCE);
  const dir = join(tmpdir(), `platform-storm-bin-${process.getuid?.() ?? 0}`);
  const binary = join(dir, `login-storm-client-${createHash("sha256").update(source).digest("hex").slice(0, 16)}`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(dir);
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? 0) || (st.mode & 0o077) !== 0) {
    throw new Error(`${dir} is not a private directory of this user`);
  }
  if (fs.existsSync(binary)) return binary;
  const tmp = `${binary}.${process.pid}.tmp`;
  try {
    await promisify(execFile)(process.env.CC ?? "cc", ["-O2", "-o", tmp, SOURCE]);
  } catch {
    fs.rmSync(tmp, { force: true });
    return undefined;
  }
  fs.renameSync(tmp, binary);
  return binary;
}

/**
 * `count` logins at once from one process of the built client against
 * `url` (http://IPv4:port), each on a connection of its own; the answers in
 * order, and the client's own CPU (user + system, ms, as it measured it).
 * `malformed` sends bodies that are not JSON (answered 400 without a hash).
 */
export function nativeStorm(
  binary: string,
  url: string,
  count: number,
  prefix: string,
  password = "storm-password",
  timeoutMs = 120_000,
  kind: "login" | "malformed" = "login",
): Promise<{ answers: StormAnswer[]; cpuMs: number }> {
  const target = new URL(url);
  const args = [target.hostname, target.port, String(count), prefix, password, String(timeoutMs)];
  const child = spawn(binary, kind === "malformed" ? [...args, "malformed"] : args, {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0
        ? resolve({
            answers: JSON.parse(out.split("\n")[0]!) as StormAnswer[],
            cpuMs: (JSON.parse(out.split("\n")[1]!) as { cpuMs: number }).cpuMs,
          })
        : reject(new Error(`storm client exited ${code}`)),
    );
  });
}
