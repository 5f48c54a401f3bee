// An exec's cleanup (its cgroup's removal, the next exec's slot: rmdirs,
// mkdirs and a helper child, several ms of kernel time) starts once its
// consumer has taken the completed event and asks for more, which rpc does
// once that event and the status reached the socket: begun from the next
// turn, it ran while node was still sending them (exec round trip).
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { contractSpec } from "../../testing/driver-contract.ts";
import { until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";

describe("local driver: an exec's cleanup waits for its completed event to be taken", () => {
  let dataDir: string;
  let driver: LocalDriver;
  let id: string;

  before(async () => {
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-cleanup-order-"));
    fs.chmodSync(dataDir, 0o711);
    driver = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      dieWithService: true,
      warmSandboxes: 0,
      cgroupPrefix: `platform-compute-cleanup-order-${process.pid}`,
    });
    const spec = contractSpec("local");
    await driver.create(spec);
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
    id = spec.sandboxId;
  });

  after(async () => {
    await driver?.destroy(id).catch(() => {});
    await driver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const execCgroups = () =>
    fs
      .readdirSync(dirname(driver.cgroupOf(id).procsFiles()[0] as string))
      .filter((n) => n.startsWith("exec-"))
      .sort();

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
