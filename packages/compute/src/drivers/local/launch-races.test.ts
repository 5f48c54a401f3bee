// A service that ends while sandboxes are being launched: no sandbox process
// may outlive it unnoticed. The fault suite found bwrap processes orphaned
// (ppid 1) after stops; these reproduce the two windows at the driver.
// Real local driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { contractSpec } from "../../testing/driver-contract.ts";
import { removeTestCgroups } from "../../testing/test-cgroups.ts";
import { until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";

const PREFIX = `platform-compute-races-${process.pid}`;

function dataDir(): string {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-races-"));
  fs.chmodSync(dir, 0o711);
  return dir;
}

function pids(): number[] {
  return fs
    .readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

function read(path: string): string {
  try {
    return fs.readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Processes of this test's sandboxes: in one of its cgroups, or holding a mount of its data directory, or naming it. */
function sandboxProcesses(dir: string, prefix: string): { inCgroup: string[]; outside: string[] } {
  const inCgroup: string[] = [];
  const outside: string[] = [];
  for (const pid of pids()) {
    if (pid === process.pid) continue;
    const cmd = read(`/proc/${pid}/cmdline`).replaceAll("\0", " ").trim();
    const stat = read(`/proc/${pid}/stat`);
    const ppid = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1];
    const what = `${pid} (ppid ${ppid}) ${cmd.slice(0, 120)}`;
    if (read(`/proc/${pid}/cgroup`).includes(prefix)) inCgroup.push(what);
    else if (read(`/proc/${pid}/mountinfo`).includes(dir) || cmd.includes(dir)) outside.push(what);
  }
  return { inCgroup, outside };
}

describe("launch races", () => {
  after(async () => {
    // The killed drivers' prefixes (kill-150, kill-450 were seen left, empty, after CI runs).
    assert.deepEqual(await removeTestCgroups(PREFIX), [], "every cgroup of this file can be removed");
  });

  test("kill -9 of the service while warm sandboxes start: nothing escapes its cgroup, and the next start ends what is left", async (t) => {
    const driverUrl = new URL("./local-driver.ts", import.meta.url).href;
    for (const delayMs of [150, 300, 450, 600]) {
      const dir = dataDir();
      const prefix = `${PREFIX}-kill-${delayMs}`;
      const code = `
        import { LocalDriver } from ${JSON.stringify(driverUrl)};
        const d = new LocalDriver({ dataDir: ${JSON.stringify(dir)}, killGraceMs: 300, cgroupPrefix: ${JSON.stringify(prefix)}, dieWithService: true, warmSandboxes: 6 });
        await d.built;
        console.log("built");
        setInterval(() => {}, 1000);`;
      const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      try {
        await new Promise<void>((resolve, reject) => {
          child.stdout.on("data", (d: Buffer) => d.toString().includes("built") && resolve());
          child.once("exit", (c) => reject(new Error(`driver process exited ${c}`)));
        });
        await sleep(delayMs);
        child.kill("SIGKILL");
        await sleep(1500);
        const afterKill = sandboxProcesses(dir, prefix);
        t.diagnostic(
          `killed ${delayMs} ms after the build: ${afterKill.inCgroup.length} processes left in its cgroups, ${afterKill.outside.length} outside`,
        );
        assert.deepEqual(afterKill.outside, [], "every process of a launch is in its sandbox's cgroup");
        const next = new LocalDriver({
          dataDir: dir,
          killGraceMs: 300,
          cgroupPrefix: prefix,
          dieWithService: true,
          warmSandboxes: 0,
        });
        try {
          await until("the next start ends every process the killed one launched", () => {
            const left = sandboxProcesses(dir, prefix);
            return left.inCgroup.length === 0 && left.outside.length === 0;
          }).catch((err: Error) => {
            throw new Error(`${err.message}: ${JSON.stringify(sandboxProcesses(dir, prefix))}`);
          });
        } finally {
          await next.close();
        }
      } finally {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  test("a destroy while a sandbox's launcher waits to be moved into its cgroup: nothing of it starts", async () => {
    // The launcher makes its mount namespace while the driver moves it into the sandbox's cgroup
    // (~13 ms: an RCU grace period); a destroy then finds the cgroup empty, so the launcher must not go on.
    const dir = dataDir();
    const prefix = `${PREFIX}-destroy`;
    const driver = new LocalDriver({
      dataDir: dir,
      killGraceMs: 300,
      cgroupPrefix: prefix,
      dieWithService: true,
      warmSandboxes: 0,
    });
    try {
      for (let round = 0; round < 3; round++) {
        const spec = contractSpec("local");
        spec.workspace.size = "64Mi";
        await driver.create(spec);
        await sleep(round * 5);
        await driver.destroy(spec.sandboxId);
        await sleep(1000);
        assert.deepEqual(
          sandboxProcesses(dir, prefix),
          { inCgroup: [], outside: [] },
          `round ${round}: nothing runs after the destroy`,
        );
      }
    } finally {
      await driver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a create still provisioning when the driver closes never starts a sandbox the closed driver would not end", async () => {
    for (let round = 0; round < 3; round++) {
      const dir = dataDir();
      const prefix = `${PREFIX}-close-${round}`;
      const driver = new LocalDriver({ dataDir: dir, killGraceMs: 300, cgroupPrefix: prefix, dieWithService: true });
      try {
        await (driver as unknown as { built: Promise<unknown> }).built;
        const specs = [contractSpec("local"), contractSpec("local")];
        for (const s of specs) s.workspace.size = "64Mi";
        const creates = specs.map((s) =>
          driver.create(s).then(
            () => "created",
            (err: Error) => err,
          ),
        );
        await sleep(round * 40);
        await driver.close();
        for (const outcome of await Promise.all(creates)) {
          if (outcome === "created") continue;
          assert.match(
            String(outcome),
            /stopping|provisioning failed/,
            "a create refused because the driver closed says so",
          );
        }
        await sleep(1000);
        assert.deepEqual(sandboxProcesses(dir, prefix), { inCgroup: [], outside: [] }, "nothing outlives close()");
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});
