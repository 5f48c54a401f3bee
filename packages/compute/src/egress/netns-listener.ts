import { spawn } from "node:child_process";
import type { Server } from "node:net";

const NSENTER = "/usr/bin/nsenter";

/**
 * Made inside the namespace, handed to this process over the IPC channel,
 * then closed there: the listening socket stays in the namespace it was
 * made in, whoever holds it.
 */
const HELPER = `
const net = require("node:net");
const server = net.createServer();
server.on("error", (err) => {
  process.send({ error: err.message }, () => process.exit(1));
});
server.listen({ host: process.argv[1], port: Number(process.argv[2]), backlog: 256 }, () => {
  process.send("listening", server, () => {
    server.close();
    process.disconnect();
  });
});
`;

/**
 * A TCP listener on `host:port` inside another network namespace (entered by
 * path, e.g. /proc/<init>/ns/net), served by this process. A short-lived
 * node in that namespace (nsenter, root, the host's mounts) makes the socket
 * and passes it over the IPC channel, then exits: what connects there is
 * accepted here, with no process and no copy in between (a forwarder such
 * as socat forks per connection and relays every byte once more). Closing
 * the server ends the listener; it keeps the namespace alive until then.
 */
export function listenInNetns(options: { netns: string; host: string; port: number }): Promise<Server> {
  const child = spawn(
    NSENTER,
    [`--net=${options.netns}`, "--", process.execPath, "-e", HELPER, options.host, String(options.port)],
    { stdio: ["ignore", "ignore", "pipe", "ipc"], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } },
  );
  return new Promise((resolve, reject) => {
    let stderr = "";
    let done = false;
    const finish = (err?: Error, server?: Server) => {
      if (done) {
        server?.close();
        return;
      }
      done = true;
      clearTimeout(timer);
      if (err) {
        child.kill("SIGKILL");
        reject(err);
      } else resolve(server as Server);
    };
    const timer = setTimeout(() => finish(new Error("no listener from the namespace within 10 s")), 10_000);
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    child.on("message", (message: unknown, handle: unknown) => {
      if (message === "listening" && handle) finish(undefined, handle as Server);
      else
        finish(
          new Error(`listening in ${options.netns} failed: ${(message as { error?: string })?.error ?? "no socket"}`),
        );
    });
    child.once("error", (err) => finish(err));
    child.once("exit", (code) => finish(new Error(`the namespace's helper exited (${code}): ${stderr.trim()}`)));
  });
}
