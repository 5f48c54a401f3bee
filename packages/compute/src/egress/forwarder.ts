import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";

/** The port the forwarder listens on inside a sandbox (its own loopback: no other sandbox sees it). */
export const SANDBOX_PROXY_PORT = 3128;

const NSENTER = "/usr/bin/nsenter";
const SETPRIV = "/usr/bin/setpriv";
const SOCAT = "/usr/bin/socat";

/**
 * The proxy variables every exec of a sandbox with a policy gets, both
 * spellings (curl reads only the lower-case http_proxy; Python, Go and npm
 * read either).
 */
export function proxyEnv(port = SANDBOX_PROXY_PORT): Record<string, string> {
  const http = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    HTTP_PROXY: http,
    HTTPS_PROXY: http,
    ALL_PROXY: `socks5h://127.0.0.1:${port}`,
    NO_PROXY: "localhost,127.0.0.1,::1",
  };
  for (const [k, v] of Object.entries({ ...env })) env[k.toLowerCase()] = v;
  return env;
}

/**
 * Starts the forwarder of one sandbox: socat, root, in the sandbox's network
 * namespace (entered by path, e.g. /proc/<init>/ns/net) and the host's mount
 * namespace, listening on 127.0.0.1:port there and relaying each connection
 * to the sandbox's proxy socket on the host. It enforces nothing (the proxy
 * does); the sandbox cannot reach the socket itself (not in its mounts), nor
 * signal the forwarder (another uid). It dies with the service
 * (PR_SET_PDEATHSIG); a restarted service starts another. Resolves once it
 * listens.
 */
export function startForwarder(options: { netns: string; socketPath: string; port?: number }): Promise<ChildProcess> {
  const port = options.port ?? SANDBOX_PROXY_PORT;
  // Quiet (no -d: a log line per connection costs a write on every connect) and with large buffers
  // (8 KiB by default: four times the system calls per MiB).
  const child = spawn(
    SETPRIV,
    [
      "--pdeathsig",
      "KILL",
      "--",
      NSENTER,
      `--net=${options.netns}`,
      "--",
      SOCAT,
      "-b",
      "262144",
      `TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork,nodelay,backlog=256`,
      `UNIX-CONNECT:${options.socketPath}`,
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  // Listening once its namespace's TCP table has 127.0.0.1:port in state LISTEN (0A).
  const wanted = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  return new Promise((resolve, reject) => {
    let stderr = "";
    let done = false;
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const onExit = (code: number | null) => {
      done = true;
      reject(new Error(`forwarder exited (${code}): ${stderr.trim()}`));
    };
    child.once("exit", onExit);
    child.once("error", (err) => {
      done = true;
      reject(err);
    });
    const started = Date.now();
    const poll = () => {
      if (done) return;
      let table = "";
      try {
        table = fs.readFileSync(`/proc/${child.pid}/net/tcp`, "utf8");
      } catch {}
      if (table.split("\n").some((l) => l.includes(` ${wanted} `) && / 0A /.test(l))) {
        done = true;
        child.off("exit", onExit);
        child.stderr?.removeAllListeners("data");
        child.stderr?.resume();
        (child.stderr as unknown as { unref?: () => void })?.unref?.();
        child.unref();
        resolve(child);
        return;
      }
      if (Date.now() - started > 10_000) {
        done = true;
        child.kill("SIGKILL");
        reject(new Error("forwarder did not listen within 10 s"));
        return;
      }
      setTimeout(poll, 2);
    };
    poll();
  });
}

/** Ends a forwarder and waits for it (at most 2 s). */
export async function stopForwarder(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((r) => {
    const timer = setTimeout(r, 2000);
    child.once("exit", () => {
      clearTimeout(timer);
      r();
    });
    child.kill("SIGKILL");
  });
}
