// The exec helper dying under compute: a request written to a helper that has
// exited but is not yet reaped fails that request, and compute goes on with a
// new helper (an unhandled EPIPE once ended compute in the middle of its close
// and left frozen sandboxes behind: fault case 6).
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ExecHelper, type Launch } from "./exec-helper.ts";

const binDir = fs.mkdtempSync(join(tmpdir(), "exec-helper-test-"));
after(() => fs.rmSync(binDir, { recursive: true, force: true }));

function helperChild(helper: ExecHelper): ChildProcess | undefined {
  return (helper as unknown as { child?: ChildProcess }).child;
}

/** Blocks the event loop until pid is a zombie, so Node has not yet seen its exit when the next request is written. */
function waitUntilZombie(pid: number): void {
  const deadline = Date.now() + 5000;
  for (;;) {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return;
    assert.ok(Date.now() < deadline, `helper ${pid} did not exit after SIGKILL`);
  }
}

// Nothing in this process is a sandbox: the helper refuses these requests, which is all the test needs of it.
const nowhere = { initPid: 1, initStartTime: "0", uid: 65534, cgroupProcs: [] };
const launch: Launch = { ...nowhere, workingDir: "/", command: "/bin/true", args: [], env: {} };

test("a request to a helper that died before compute saw its exit fails, and the next one gets a new helper", async () => {
  const helper = new ExecHelper(undefined, binDir);
  try {
    await helper.place(nowhere);
    const first = helperChild(helper);
    assert.ok(first?.pid, "a helper is running");
    process.kill(first.pid, "SIGKILL");
    waitUntilZombie(first.pid);
    assert.equal(helperChild(helper), first, "compute has not yet seen the exit");

    // Both kinds of request go to the dead helper's stdin: EPIPE.
    await helper.place(nowhere);
    await assert.rejects(helper.launch(launch), "the launch fails instead of waiting for streams forever");

    assert.notEqual(helperChild(helper), first, "the dead helper is forgotten");
    await helper.place(nowhere);
    const second = helperChild(helper);
    assert.ok(second?.pid && second.pid !== first.pid, "a new helper serves the next request");
  } finally {
    await helper.close();
  }
});
