// Preloaded (node --import) into every service the launcher starts, whose
// stdin is a pipe the launcher holds open. However the launcher ends
// (SIGKILL, a crash, an OOM kill), the kernel closes its end: the service
// then stops the way the launcher would have stopped it, with SIGTERM to
// itself (each service's own handler drains and cleans up), instead of
// running on as an orphan holding its ports, database and sandboxes.
// Plain JavaScript: bundled services run on Node alone.

/** A service whose own stop hangs is ended as the launcher's grace would have ended it. */
const GRACE_MS = 15_000;

let gone = false;
function launcherGone() {
  if (gone) return;
  gone = true;
  // Its stdout and stderr were pipes to the launcher too: what the stop logs
  // must not fail the stop (EPIPE) half-way through its clean-up.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  setTimeout(() => process.exit(1), GRACE_MS).unref();
  process.kill(process.pid, "SIGTERM");
}

process.stdin.on("end", launcherGone);
process.stdin.on("error", launcherGone);
process.stdin.resume();
// Watching never keeps a service alive: one that ends its work exits as before.
process.stdin.unref?.();
