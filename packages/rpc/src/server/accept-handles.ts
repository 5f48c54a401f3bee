import { spawn } from "node:child_process";

/**
 * Node 20's libuv (since 1.45, "unix: don't accept() connections in a
 * loop") accepts one connection per listening file descriptor per event-loop
 * turn. On a busy loop a turn lasts tens of milliseconds (every ready socket's
 * work runs in it), so a listener takes in a few dozen connections a second
 * and a burst of new connections waits in the kernel's listen queue: measured
 * on agents under the mixed-load bench figure, 170 connections opened at once
 * by the load and the /livez probes behind them waited 1 to 5 s between the
 * client's connect and the service's accept, while the event loop itself was
 * never blocked for more than 250 ms.
 *
 * More descriptors of the same listening socket each take one connection per
 * turn: `count` of them accept up to `count` connections a turn, from the one
 * kernel queue. Node has no dup() and no SO_REUSEPORT before 22.12, but
 * passing a handle to another process over IPC (SCM_RIGHTS) gives the
 * receiver a new descriptor of it: a throwaway child receives the handle
 * `extra` times and sends each copy back, so this process gets `extra` new
 * descriptors of its own socket. The child never listens on its copies (a
 * raw handle, not a net.Server), so it accepts nothing, and its copies close
 * when it exits.
 *
 * Resolves with the raw handles (for `net.Server.listen(handle)`); rejects
 * when the child cannot be started or does not answer within `timeoutMs`.
 */
export function duplicateListenHandle(handle: object, extra: number, timeoutMs = 10_000): Promise<object[]> {
  if (extra <= 0) return Promise.resolve([]);
  const env = { ...process.env };
  // The parent's preloads (tsx, profilers) have nothing to do in the child.
  delete env.NODE_OPTIONS;
  const child = spawn(
    process.execPath,
    [
      "-e",
      `let n = 0; process.on("message", (m, h) => process.send(m, h, undefined, () => { if (++n === ${extra}) process.disconnect(); }));`,
    ],
    { stdio: ["ignore", "ignore", "inherit", "ipc"], env },
  );
  return new Promise<object[]>((resolve, reject) => {
    const got: object[] = [];
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error("accept handles: the helper did not answer")), timeoutMs);
    child.on("error", fail);
    // Resolved once the helper is gone, so nothing it holds outlives the listen.
    child.on("exit", (code, signal) => {
      if (got.length < extra) return fail(new Error(`accept handles: the helper exited (${code ?? signal})`));
      clearTimeout(timer);
      resolve(got);
    });
    child.on("message", (_m, h) => {
      if (!h) return;
      got.push(h as object);
      if (got.length === extra && child.connected) child.disconnect();
    });
    // `send` takes a net.Server, a net.Socket or a raw TCP/Pipe handle; the raw handle travels as
    // "net.Native", which the receiver gets as a handle it does not listen on.
    const send = child.send.bind(child) as (m: unknown, h: unknown) => boolean;
    for (let i = 0; i < extra; i++) send(i, handle);
  });
}
