// A stop at any moment of the warm pool's provisioning (workspace image
// made, loop device attached, cgroup created, launch chain starting) ends
// every warm sandbox completely: no cgroup in any hierarchy, no loop device
// of the data directory, no directory. The platform's stop came while a
// refill was provisioning and left two warm sandboxes' freezer cgroups and
// loop devices (crashes-and-restarts case 6).
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { contractSpec } from "../../testing/driver-contract.ts";
import { LocalDriver } from "./local-driver.ts";
import { loopDevicesBackedBy } from "./mount-table.ts";
import type { WarmPool } from "./warm-pool.ts";

/** Every cgroup directory named by `prefix` in any hierarchy (v1 controllers and the unified one). */
function cgroupsOf(prefix: string): string[] {
  const found: string[] = [];
  for (const controller of fs.readdirSync("/sys/fs/cgroup")) {
    const root = join("/sys/fs/cgroup", controller);
    const walk = (dir: string, depth: number) => {
      let subs: fs.Dirent[] = [];
      try {
        subs = fs.readdirSync(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const s of subs) {
        if (!s.isDirectory()) continue;
        const path = join(dir, s.name);
        if (s.name.startsWith(prefix)) found.push(path);
        else if (depth < 3) walk(path, depth + 1);
      }
    };
    walk(root, 0);
  }
  return found;
}

describe("local driver: closed while its warm pool provisions", () => {
  let dataDir: string;
  const prefix = `platform-compute-warmclose-${process.pid}`;

  before(() => {
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-warm-close-"));
    fs.chmodSync(dataDir, 0o711);
  });
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const driver = (warmSandboxes: number) =>
    new LocalDriver({ dataDir, killGraceMs: 300, cgroupPrefix: prefix, dieWithService: true, warmSandboxes });
  const warmDirs = () => fs.readdirSync(join(dataDir, "sandboxes")).filter((n) => n.startsWith(".warm-"));

  /** Closes `d` and asserts nothing of any sandbox of this prefix is left: cgroups, loop devices, warm directories. */
  async function closeLeavesNothing(d: LocalDriver): Promise<void> {
    const closed = performance.now();
    await d.close();
    const closeMs = performance.now() - closed;
    const left = { cgroups: cgroupsOf(prefix), loops: loopDevicesBackedBy(dataDir), warm: warmDirs() };
    assert.deepEqual(left, { cgroups: [], loops: [], warm: [] }, `close took ${closeMs.toFixed(0)} ms`);
  }

  for (const delayMs of [0, 20, 60, 120, 250, 500, 1000]) {
    test(`closed ${delayMs} ms after start: nothing of a warm sandbox is left`, async () => {
      const d = driver(3);
      await sleep(delayMs);
      await closeLeavesNothing(d);
    });
  }

  for (const delayMs of [0, 60, 100, 130, 200, 400]) {
    test(`an adoption, then closed ${delayMs} ms later (the refill provisioning): nothing is left`, async () => {
      const d = driver(2);
      const ready = () => warmDirs().filter((n) => fs.existsSync(join(dataDir, "sandboxes", n, "state.json")));
      for (let i = 0; i < 400 && ready().length < 2; i++) await sleep(25);
      // Otherwise the create below builds its own sandbox and no adoption (nor refill) is tested.
      assert.equal(ready().length, 2, "two warm sandboxes are started");
      await d.create(contractSpec(""));
      await sleep(delayMs);
      await closeLeavesNothing(d);
    });
  }

  test("a warm pool ended on purpose (a new default image) warns of nothing; a warm sandbox killed from outside is warned of", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const d = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: prefix,
      dieWithService: true,
      warmSandboxes: 2,
      logger,
    });
    const pool = (d as unknown as { warm: WarmPool<{ observation: { phase: string }; initPid?: number }> }).warm;
    const ready = () => pool.sandboxes.filter((w) => w.observation.phase === "ready");
    const warned = () => lines.filter((l) => l.includes("a warm sandbox exited before it was used")).length;
    try {
      for (let i = 0; i < 400 && ready().length < 2; i++) await sleep(25);
      assert.equal(ready().length, 2, "two warm sandboxes are started");
      process.kill(ready()[0]?.initPid as number, "SIGKILL");
      for (let i = 0; i < 200 && warned() === 0; i++) await sleep(25);
      assert.equal(warned(), 1, "an init killed from outside is warned of");
      for (let i = 0; i < 400 && ready().length < 2; i++) await sleep(25);
      await pool.close();
      await sleep(500);
      assert.equal(warned(), 1, `the pool's own ending is no warning:\n${lines.join("")}`);
    } finally {
      await closeLeavesNothing(d);
    }
  });
});
