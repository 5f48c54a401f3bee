// test-timeout: 300000
// kill -9 of compute during a pause (issue 18 item 6). A service in another
// process, whose sandboxes outlive it (production's default), pauses a
// sandbox and is killed: once after the freeze but before the domain recorded
// PAUSED (the record, given back to recover(), still says running), once
// after the record. The next service finds the files, the sandbox either
// paused and resumable or running, and nothing of it is left once destroyed
// (cgroup, bwrap, mount, loop device). Real local driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import type { SandboxSpec } from "../../driver.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { firstLine } from "../../testing/first-line.ts";
import { LOOP_SETTLE_MS, until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";
import { loopDevicesBackedBy, mountPointsOf } from "./mount-table.ts";
import { processStartTime } from "./sandbox-layout.ts";

const PREFIX = `platform-compute-pause-crash-${process.pid}`;

interface Killed {
  spec: SandboxSpec;
  pausedAt: string;
  cgroupDirs: string[];
  initPid: number;
  initStartTime: string;
  image: string;
}

/** A service in another process that makes a sandbox, writes a file, pauses it, reports, and waits to be killed -9. */
async function pausedThenKilled(dir: string): Promise<Killed> {
  const driverUrl = new URL("./local-driver.ts", import.meta.url).href;
  const contractUrl = new URL("../../testing/driver-contract.ts", import.meta.url).href;
  const code = `
    import { dirname, join } from "node:path";
    import * as fs from "node:fs";
    import { LocalDriver } from ${JSON.stringify(driverUrl)};
    import { collectExec, contractSpec } from ${JSON.stringify(contractUrl)};
    const d = new LocalDriver({ dataDir: ${JSON.stringify(dir)}, killGraceMs: 300, cgroupPrefix: ${JSON.stringify(PREFIX)}, dieWithService: false, warmSandboxes: 0 });
    const spec = contractSpec("local");
    spec.workspace.size = "64Mi";
    await d.create(spec);
    await d.waitSettled(spec.sandboxId);
    await collectExec(d, spec.sandboxId, { command: "/bin/sh", args: ["-c", "mkdir -p deep && echo before-pause > deep/kept.txt"] });
    await d.writeFile(spec.sandboxId, "by-call.txt", new TextEncoder().encode("written by a call"), false, 0o644);
    // A command still running when the sandbox is frozen (its writes so far must survive too).
    const bg = collectExec(d, spec.sandboxId, { command: "/bin/sh", args: ["-c", "echo started > running.txt; sleep 1000"] });
    bg.catch(() => {});
    while (!fs.existsSync(join(${JSON.stringify(dir)}, "workspaces"))) await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 200; i++) {
      const r = await d.readFile(spec.sandboxId, "running.txt", 0, 100).catch(() => undefined);
      if (r) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    await d.pause(spec.sandboxId);
    const state = JSON.parse(fs.readFileSync(join(${JSON.stringify(dir)}, "sandboxes", spec.sandboxId, "state.json"), "utf8"));
    const ws = join(${JSON.stringify(dir)}, "workspaces", spec.tenantId + "_" + spec.sessionId, "workspace.img");
    console.log(JSON.stringify({ spec, pausedAt: new Date().toISOString(), initPid: state.initPid, initStartTime: state.initStartTime, image: ws, cgroupDirs: d.cgroupOf(spec.sandboxId).procsFiles().map((f) => dirname(f)) }));
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const line = await firstLine(child, "the service pausing");
    const parsed = JSON.parse(line) as Killed;
    parsed.spec.createdAt = new Date(parsed.spec.createdAt);
    return parsed;
  } finally {
    child.kill("SIGKILL");
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r));
  }
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** Nothing of the killed service's sandbox is left: its processes, its cgroup, its workspace's mount and loop device. */
async function assertNothingLeft(killed: Killed): Promise<void> {
  await until("the sandbox's init has ended", () => processStartTime(killed.initPid) !== killed.initStartTime);
  await until("its cgroups are removed", () => killed.cgroupDirs.every((d) => !fs.existsSync(d)));
  // Another test file's sandbox launch may hold the workspace's mount for a few ms more (LOOP_SETTLE_MS).
  await until(
    "no loop device backs the workspace image",
    () => loopDevicesBackedBy(killed.image).length === 0,
    LOOP_SETTLE_MS,
  );
  assert.deepEqual(loopDevicesBackedBy(killed.image).flatMap(mountPointsOf), []);
}

async function withKilledService(
  body: (killed: Killed, next: LocalDriver, dir: string) => Promise<void>,
  nextOptions: { releasePausedAfterMs?: number } = {},
): Promise<void> {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-pause-crash-"));
  fs.chmodSync(dir, 0o711);
  let killed: Killed | undefined;
  let next: LocalDriver | undefined;
  try {
    killed = await pausedThenKilled(dir);
    next = new LocalDriver({
      dataDir: dir,
      killGraceMs: 300,
      cgroupPrefix: PREFIX,
      dieWithService: true,
      warmSandboxes: 0,
      ...nextOptions,
    });
    await body(killed, next, dir);
  } finally {
    // A failed case must not leave a frozen sandbox behind (it outlives the killed service).
    if (killed && next) {
      const sandboxId = killed.spec.sandboxId;
      await next.resume(sandboxId).catch(() => {});
      await next.destroy(sandboxId).catch(() => {});
    }
    for (const d of killed?.cgroupDirs ?? []) {
      try {
        fs.writeFileSync(join(dirname(d), "freezer.state"), "THAWED");
      } catch {}
    }
    await next?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The session's next sandbox sees every file written before the pause. */
async function nextSandboxSeesFiles(driver: LocalDriver, killed: Killed): Promise<void> {
  const spec = { ...contractSpec("local"), tenantId: killed.spec.tenantId, sessionId: killed.spec.sessionId };
  await driver.create(spec);
  assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(120_000))).phase, "ready");
  const r = await collectExec(driver, spec.sandboxId, {
    command: "/bin/sh",
    args: ["-c", "cat deep/kept.txt by-call.txt running.txt"],
  });
  assert.equal(r.stdout, "before-pause\nwritten by a callstarted\n", r.stderr);
  await driver.destroy(spec.sandboxId);
}

describe("kill -9 of compute during a pause", () => {
  test("between the freeze and the record: the sandbox runs again (record says READY), files kept, nothing leaked", async () => {
    await withKilledService(async (killed, next) => {
      // The record never said PAUSED: recover gets the spec without pausedAt.
      const spec = { ...killed.spec, pausedAt: undefined };
      const o = await next.recover(spec);
      assert.equal(o.phase, "ready", JSON.stringify(o));
      assert.equal(next.cgroupOf(spec.sandboxId).isFrozen(), false, "thawed, as its record says running");
      // Several execs: the sandbox still holds the old service's exec cgroups (the frozen command's, the spare's).
      for (let i = 0; i < 4; i++) {
        const r = await collectExec(next, spec.sandboxId, { command: "/bin/cat", args: ["deep/kept.txt"] });
        assert.equal(r.stdout, "before-pause\n", r.stderr);
      }
      assert.equal(text((await next.readFile(spec.sandboxId, "by-call.txt", 0, 100)).data), "written by a call");
      // It pauses and resumes again.
      await next.pause(spec.sandboxId);
      assert.equal(next.cgroupOf(spec.sandboxId).isFrozen(), true);
      assert.equal((await next.resume(spec.sandboxId)).phase, "ready");
      await next.destroy(spec.sandboxId);
      await assertNothingLeft(killed);
      await nextSandboxSeesFiles(next, killed);
      await assertNothingLeft(killed);
    });
  });

  test("after the record: the sandbox is PAUSED (frozen) and resumable, files kept, nothing leaked", async () => {
    await withKilledService(async (killed, next) => {
      const spec = { ...killed.spec, pausedAt: new Date(killed.pausedAt) };
      const o = await next.recover(spec);
      assert.equal(o.phase, "paused", JSON.stringify(o));
      assert.equal(next.cgroupOf(spec.sandboxId).isFrozen(), true, "still frozen");
      // Its files are readable while paused.
      assert.equal(text((await next.readFile(spec.sandboxId, "deep/kept.txt", 0, 100)).data), "before-pause\n");
      assert.equal((await next.resume(spec.sandboxId)).phase, "ready");
      assert.equal(next.cgroupOf(spec.sandboxId).isFrozen(), false);
      const r = await collectExec(next, spec.sandboxId, {
        command: "/bin/sh",
        args: ["-c", "cat deep/kept.txt running.txt && echo after > after.txt"],
      });
      assert.equal(r.stdout, "before-pause\nstarted\n", r.stderr);
      for (let i = 0; i < 3; i++) {
        const again = await collectExec(next, spec.sandboxId, { command: "/bin/cat", args: ["after.txt"] });
        assert.equal(again.stdout, "after\n", again.stderr);
      }
      await next.destroy(spec.sandboxId);
      await assertNothingLeft(killed);
      await nextSandboxSeesFiles(next, killed);
      await assertNothingLeft(killed);
    });
  });

  test("after the record, then released by the next service: its processes end and a resume starts it again with the files", async () => {
    await withKilledService(
      async (killed, next) => {
        const spec = { ...killed.spec, pausedAt: new Date(killed.pausedAt) };
        assert.equal((await next.recover(spec)).phase, "paused");
        await until("the frozen processes are ended by the release", () => next.cgroupOf(spec.sandboxId).isEmpty());
        assert.equal((await next.observe(spec.sandboxId)).phase, "paused", "still paused once released");
        assert.equal((await next.resume(spec.sandboxId)).phase, "ready");
        const r = await collectExec(next, spec.sandboxId, {
          command: "/bin/cat",
          args: ["deep/kept.txt", "running.txt"],
        });
        assert.equal(r.stdout, "before-pause\nstarted\n", r.stderr);
        await next.destroy(spec.sandboxId);
        await assertNothingLeft(killed);
      },
      { releasePausedAfterMs: 200 },
    );
  });
});
