// The pod-side RUN wrapper, run by the host's sh: a cancel that follows the
// command's first output must find the pid file (kubernetes-contract's cancel
// case hung until the pod's deadline when the wrapper wrote it after "&").
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { KILL, RUN, STATE_DIR } from "./scripts.ts";

test("the pid file names the command's own process before the command's first instruction", () => {
  // Written by the wrapper after "&", it was missing when the command started in 43 of 300 tries
  // of a shell copy of the old wrapper with both cores busy (1 of 300 quiet); through node the
  // old wrapper won every try here, so this states the order rather than provoking the race.
  const id = randomBytes(8).toString("hex");
  const probe = `test "$(cat ${STATE_DIR}/${id}.pid 2>/dev/null)" = "$$" && echo found || echo missing`;
  const seen = { found: 0, missing: 0 };
  for (let i = 0; i < 20; i++) {
    const out = execFileSync("/bin/sh", ["-c", RUN, "sh", id, "/", "0", "/bin/sh", "-c", probe], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    seen[out.trim() as keyof typeof seen]++;
  }
  assert.deepEqual(seen, { found: 20, missing: 0 });
});

test("the exit status is the command's, and a missing command is 127", () => {
  const id = randomBytes(8).toString("hex");
  const status = (cmd: string[]) => {
    try {
      execFileSync("/bin/sh", ["-c", RUN, "sh", id, "/", "0", ...cmd], { stdio: "ignore" });
      return 0;
    } catch (err) {
      return (err as { status: number }).status;
    }
  };
  assert.equal(status(["/bin/sh", "-c", "exit 7"]), 7);
  assert.equal(status(["/nonexistent/command"]), 127);
});

test("KILL ends a tree that is still forking: the command's stream closes with no survivor", async () => {
  // With "kill -TERM -- -pgid", which dash refuses, only the /proc scan signalled anything, and the
  // children forked while it ran kept the exec's stdout open: kubernetes-contract's cancel case
  // then waited until the pod's deadline (299 s in CI).
  const id = randomBytes(8).toString("hex");
  const tree = "echo started; while :; do sleep 1000 & sleep 0.005; done";
  const run = spawn("/bin/sh", ["-c", RUN, "sh", id, "/", "0", "/bin/sh", "-c", tree], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  const closed = new Promise<void>((resolve) => run.on("close", () => resolve()));
  await new Promise<void>((resolve) => run.stdout.once("data", () => resolve()));
  await new Promise((r) => setTimeout(r, 200));
  const pgid = Number(readFileSync(`${STATE_DIR}/${id}.pid`, "utf8"));
  try {
    execFileSync("/bin/sh", ["-c", KILL, "sh", id, "TERM"], { stdio: "ignore" });
    const ended = await Promise.race([
      closed.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 5000)),
    ]);
    assert.ok(ended, "the command's stdout was still open 5 s after KILL");
  } finally {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {}
  }
});
