// An exec's cleanup (its cgroup's removal, the next exec's slot: rmdirs,
// mkdirs and a helper child, several ms of kernel time) starts once its
// consumer has taken the completed event and asks for more, which rpc does
// once that event and the status reached the socket: begun from the next
// turn, it ran while node was still sending them (exec round trip).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type ReadySandboxes, readySandboxes } from "../../testing/ready-sandboxes.ts";
import { until } from "../../testing/until.ts";
import type { LocalDriver } from "./local-driver.ts";

describe("local driver: an exec's cleanup waits for its completed event to be taken", () => {
  let sandboxes: ReadySandboxes;
  let driver: LocalDriver;
  let id: string;
  const execCgroups = () => sandboxes.execCgroups(id);

  before(async () => {
    sandboxes = await readySandboxes("cleanup-order", 1);
    driver = sandboxes.driver;
    id = sandboxes.ids[0] as string;
  });

  after(() => sandboxes?.close());

  test("the used cgroup stays and no slot is made until the consumer asks past the completed event", async () => {
    await until("the first slot is made", () => execCgroups().length === 1);
    const slots = execCgroups();
    const events = driver.exec(id, { command: "/bin/true", args: [], env: {}, workingDir: "/workspace" });
    let next = await events.next();
    while (!next.done && next.value.type !== "completed") next = await events.next();
    assert.equal(next.done ? undefined : next.value.type, "completed");
    await sleep(200);
    assert.deepEqual(execCgroups(), slots, "nothing is removed or made while the completed event is on its way");
    assert.equal((await events.next()).done, true);
    await until("the used cgroup is gone and the next slot made", () => {
      const now = execCgroups();
      return now.length === 1 && now[0] !== slots[0];
    });
  });
});
