// An exec's cleanup (its cgroup's removal, the next exec's slot) waits while
// another exec of the driver runs, at most AFTERMATH_HOLD_MS: in the density
// figure's burst of 100 execs on 100 sandboxes the first to finish took CPU
// from the rest with their rmdirs and mkdirs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { ExecEvent } from "../../driver.ts";
import { collectExec } from "../../testing/driver-contract.ts";
import { type ReadySandboxes, readySandboxes } from "../../testing/ready-sandboxes.ts";
import { until } from "../../testing/until.ts";
import { AFTERMATH_HOLD_MS, type LocalDriver } from "./local-driver.ts";

describe("local driver: an ended exec's cleanup waits for the driver's other execs", () => {
  let sandboxes: ReadySandboxes;
  let driver: LocalDriver;
  let long: string;
  let short: string;
  let execCgroups: (id: string) => string[];

  before(async () => {
    sandboxes = await readySandboxes("aftermath", 2);
    ({ driver, execCgroups } = sandboxes);
    [long, short] = sandboxes.ids as [string, string];
  });

  after(() => sandboxes?.close());

  /** Starts `sleep 30` on the long sandbox and resolves once it runs; abort ends it. */
  async function running(abort: AbortController): Promise<{ done: Promise<ExecEvent[]> }> {
    const events: ExecEvent[] = [];
    let started!: () => void;
    const begun = new Promise<void>((r) => (started = r));
    const done = (async () => {
      for await (const e of driver.exec(long, {
        command: "/bin/sh",
        args: ["-c", "echo up; exec sleep 30"],
        env: {},
        workingDir: "/workspace",
        signal: abort.signal,
      })) {
        events.push(e);
        if (e.type === "stdout") started();
      }
      return events;
    })();
    await Promise.race([begun, done]);
    return { done };
  }

  test("held while another exec runs, done when it ends", async () => {
    await until("the short sandbox's first slot is made", () => execCgroups(short).length === 1);
    const slots = execCgroups(short);
    const abort = new AbortController();
    const { done } = await running(abort);
    assert.equal((await collectExec(driver, short, { command: "/bin/true" })).completed.exitCode, 0);
    await sleep(150);
    assert.deepEqual(execCgroups(short), slots, "the used cgroup stays and no new slot is made while sleep runs");
    abort.abort();
    assert.equal((await done).at(-1)?.type, "completed");
    await until("the used cgroup is gone and the next slot made", () => {
      const now = execCgroups(short);
      return now.length === 1 && now[0] !== slots[0];
    });
  });

  test("held at most AFTERMATH_HOLD_MS: a long command elsewhere does not keep a sandbox without its next slot", async () => {
    await until("the short sandbox has one slot", () => execCgroups(short).length === 1);
    const slots = execCgroups(short);
    const abort = new AbortController();
    const { done } = await running(abort);
    const ended = Date.now();
    assert.equal((await collectExec(driver, short, { command: "/bin/true" })).completed.exitCode, 0);
    await until(
      "the cleanup runs while sleep still runs",
      () => {
        const now = execCgroups(short);
        return now.length === 1 && now[0] !== slots[0];
      },
      5000,
    );
    assert.ok(Date.now() - ended >= AFTERMATH_HOLD_MS - 50, "not before the hold ended");
    let finished = false;
    void done.then(() => (finished = true));
    await sleep(0);
    assert.equal(finished, false, "sleep still runs");
    abort.abort();
    await done;
  });
});
