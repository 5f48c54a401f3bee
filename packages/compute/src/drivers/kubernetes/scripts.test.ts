// The pod-side RUN wrapper, run by the host's sh: a cancel that follows the
// command's first output must find the pid file (kubernetes-contract's cancel
// case hung until the pod's deadline when the wrapper wrote it after "&").
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { RUN, STATE_DIR } from "./scripts.ts";

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
