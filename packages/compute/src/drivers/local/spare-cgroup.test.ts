// test-timeout: 240000
// A released sandbox resumes in the spare launcher's cgroup (spare-cgroup.ts):
// the spare waits in a cgroup of its own, which the resume renames into the
// sandbox's place, so nothing is moved into a cgroup on the resume's path.
// The resumed sandbox's processes are in the sandbox's cgroups with its
// limits, its usage never goes down, no spare or retired cgroup is left after
// destroy, close, or a kill -9 of the service and its restart. Real local
// driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { SandboxSpec, Usage } from "../../driver.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { firstLine } from "../../testing/first-line.ts";
import { until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";
import { processStartTime } from "./sandbox-layout.ts";

const PREFIX = `platform-compute-spare-cgroup-${process.pid}`;
const PIDS_MAX = 77;

const driverAt = (dataDir: string) =>
  new LocalDriver({
    dataDir,
    killGraceMs: 300,
    cgroupPrefix: PREFIX,
    dieWithService: true,
    warmSandboxes: 0,
    releasePausedAfterMs: 0,
    pidsMax: PIDS_MAX,
  });

/** The driver's cgroup in each hierarchy (the parent of a sandbox's). */
function rootDirs(driver: LocalDriver, id: string): string[] {
  return [...new Set(Object.values(driver.cgroupOf(id).dirs))].map((d) => dirname(d));
}

/** Names under the driver's cgroups, in any hierarchy, starting with prefix. */
function namesStarting(roots: string[], prefix: string): string[] {
  const out = new Set<string>();
  for (const r of roots) {
    let names: string[] = [];
    try {
      names = fs.readdirSync(r).filter((n) => n.startsWith(prefix));
    } catch {}
    for (const n of names) out.add(n);
  }
  return [...out];
}

/** The spare launcher's cgroup of the service with this pid, once the spare is in it in every hierarchy: its name and the spare's pid. */
async function spareReady(roots: string[], servicePid: number): Promise<{ name: string; pid: number }> {
  let found: { name: string; pid: number } | undefined;
  await until("the spare launcher is in a cgroup of its own", () => {
    for (const name of namesStarting(roots, `.spare-${servicePid}-`)) {
      const pids = roots.map((r) => readLines(join(r, name, "cgroup.procs")));
      const pid = pids[0]?.[0];
      if (pid && pids.every((p) => p.includes(pid))) found = { name, pid: Number(pid) };
    }
    return found !== undefined;
  });
  await sleep(50); // the driver marks it ready right after the last write
  return found as { name: string; pid: number };
}

function readLines(file: string): string[] {
  try {
    return fs.readFileSync(file, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

const inode = (dir: string) => fs.statSync(dir).ino;

/** A command burning CPU for about ms and holding ~8 MiB for a moment (the memory peak). */
const burn = (ms: number) => ({
  command: "/bin/sh",
  args: [
    "-c",
    `x=$(head -c 8000000 /dev/zero | tr '\\0' a); end=$(($(date +%s%N) + ${ms}000000)); while [ $(date +%s%N) -lt $end ]; do :; done; echo \${#x}`,
  ],
});

function assertNotLess(after: Usage, before: Usage, when: string): void {
  assert.ok(after.cpuMs >= before.cpuMs, `${when}: cpu ${after.cpuMs} ms >= ${before.cpuMs} ms`);
  assert.ok(
    after.memoryPeakBytes >= before.memoryPeakBytes,
    `${when}: memory peak ${after.memoryPeakBytes} >= ${before.memoryPeakBytes}`,
  );
}

describe("a released sandbox resumes in the spare launcher's cgroup", () => {
  test("its processes are in the sandbox's cgroups with its limits, its usage goes on, nothing is left", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "compute-spare-cgroup-"));
    fs.chmodSync(dir, 0o711);
    const driver = driverAt(dir);
    const spec = contractSpec("local", { cpuMillis: 700, memoryBytes: 200 * 1024 * 1024 });
    spec.workspace.size = "64Mi";
    const id = spec.sandboxId;
    let roots: string[] = [];
    try {
      await driver.create(spec);
      assert.equal((await driver.waitSettled(id)).phase, "ready");
      roots = rootDirs(driver, id);
      assert.equal((await collectExec(driver, id, burn(300))).stdout, "8000000\n");
      const ran = await driver.usage(id);
      assert.ok(ran.cpuMs >= 100, `cpu counted (${ran.cpuMs} ms)`);
      assert.ok(ran.memoryPeakBytes >= 8_000_000, `memory peak counted (${ran.memoryPeakBytes} B)`);

      for (let round = 1; round <= 2; round++) {
        const before = await driver.usage(id);
        await driver.pause(id);
        await until("released", () => driver.cgroupOf(id).isEmpty());
        const spare = await spareReady(roots, process.pid);
        assertNotLess(await driver.usage(id), before, `round ${round}, released`);
        const own = driver.cgroupOf(id);
        const ownInode = inode(own.dirs.pids as string);
        const spareInode = inode(join(dirname(own.dirs.pids as string), spare.name));

        assert.equal((await driver.resume(id)).phase, "ready");
        const cgroup = driver.cgroupOf(id);
        // The spare's cgroup took the sandbox's place (the same directory, renamed), in every hierarchy.
        assert.equal(
          inode(cgroup.dirs.pids as string),
          spareInode,
          `round ${round}: the spare's cgroup is the sandbox's`,
        );
        assert.notEqual(spareInode, ownInode);
        assert.deepEqual(namesStarting(roots, `.spare-${process.pid}-`), [], "no spare cgroup left once taken");
        await until("the sandbox's cgroup before is removed", () => namesStarting(roots, ".retired-").length === 0);
        const resumed = await driver.usage(id);
        assertNotLess(resumed, before, `round ${round}, resumed`);

        // The launcher (now the sandbox's bwrap), the init and an exec's processes: in the sandbox's cgroups.
        const state = JSON.parse(fs.readFileSync(join(dir, "sandboxes", id, "state.json"), "utf8")) as {
          initPid: number;
          bwrapPid: number;
        };
        assert.equal(state.bwrapPid, spare.pid, "the spare launcher started the sandbox");
        const running = collectExec(driver, id, { command: "/bin/sh", args: ["-c", "sleep 1; echo slept"] });
        await until("the exec runs", () => cgroup.pids().length >= 4);
        const pids = cgroup.pids();
        assert.ok(pids.includes(state.initPid) && pids.includes(state.bwrapPid), "init and bwrap in the sandbox");
        for (const pid of pids) {
          for (const line of readLines(`/proc/${pid}/cgroup`)) {
            const [, controllers = "", path = ""] = line.split(":");
            if (!controllers.split(",").some((c) => ["cpu", "memory", "pids", "blkio", "freezer"].includes(c)))
              continue;
            assert.match(path, new RegExp(`/${PREFIX}/${id}(/exec-\\d+)?$`), `pid ${pid} in ${line}`);
          }
        }
        assert.equal((await running).stdout, "slept\n");

        // Its limits, as a create sets them.
        const read = (key: string, file: string) =>
          fs.readFileSync(join(cgroup.dirs[key] as string, file), "utf8").trim();
        assert.equal(read("memory", "memory.limit_in_bytes"), String(200 * 1024 * 1024));
        assert.equal(read("pids", "pids.max"), String(PIDS_MAX));
        assert.equal(read("cpu", "cpu.cfs_quota_us"), "70000");
        assert.equal(read("cpu", "cpu.cfs_period_us"), "100000");
        assert.equal(read("freezer", "freezer.state"), "THAWED");

        // It counts on from there, and pauses (frozen) and resumes as before.
        assert.equal((await collectExec(driver, id, burn(200))).stdout, "8000000\n");
        const more = await driver.usage(id);
        assertNotLess(more, resumed, `round ${round}, after more work`);
        assert.ok(more.cpuMs > resumed.cpuMs, "the new cgroup's cpu counts");
        await driver.pause(id);
        assert.equal(driver.cgroupOf(id).isFrozen(), true);
        assert.equal((await driver.resume(id)).phase, "ready");
        assert.equal(driver.cgroupOf(id).isFrozen(), false);
      }

      // A spare is made again at the next release; destroy and close leave none of them.
      await driver.pause(id);
      await until("released", () => driver.cgroupOf(id).isEmpty());
      await spareReady(roots, process.pid);
      const last = await driver.usage(id);
      const total = await driver.destroy(id);
      assertNotLess(total, last, "destroyed");
      assert.deepEqual(namesStarting(roots, id), [], "the sandbox's cgroup is removed");
    } finally {
      await driver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    assert.deepEqual(namesStarting(roots, ".spare-"), [], "no spare cgroup after close");
    assert.deepEqual(namesStarting(roots, ".retired-"), [], "no retired cgroup after close");
  });

  test("kill -9 of the service with a spare made: the restart removes its cgroup, the sandbox resumes with its usage", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "compute-spare-cgroup-"));
    fs.chmodSync(dir, 0o711);
    const driverUrl = new URL("./local-driver.ts", import.meta.url).href;
    const contractUrl = new URL("../../testing/driver-contract.ts", import.meta.url).href;
    // Sandboxes outlive this service (production's default); released at once, resumed once into a spare's
    // cgroup, released again with a new spare made: then it reports and waits to be killed.
    const code = `
      import { LocalDriver } from ${JSON.stringify(driverUrl)};
      import { collectExec, contractSpec } from ${JSON.stringify(contractUrl)};
      const d = new LocalDriver({ dataDir: ${JSON.stringify(dir)}, killGraceMs: 300, cgroupPrefix: ${JSON.stringify(PREFIX)}, dieWithService: false, warmSandboxes: 0, releasePausedAfterMs: 0 });
      const spec = contractSpec("local");
      spec.workspace.size = "64Mi";
      const id = spec.sandboxId;
      const released = async () => { while (!d.cgroupOf(id).isEmpty()) await new Promise((r) => setTimeout(r, 20)); };
      await d.create(spec);
      await d.waitSettled(id);
      await collectExec(d, id, ${JSON.stringify(burn(300))});
      await d.pause(id);
      await released();
      await new Promise((r) => setTimeout(r, 500)); // the spare in its cgroup
      await d.resume(id);
      await collectExec(d, id, { command: "/bin/sh", args: ["-c", "echo kept > kept.txt"] });
      await d.pause(id);
      await released();
      console.log(JSON.stringify({ spec, usage: await d.usage(id), pausedAt: new Date().toISOString(), dirs: Object.values(d.cgroupOf(id).dirs) }));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let next: LocalDriver | undefined;
    let spec: SandboxSpec | undefined;
    let roots: string[] = [];
    try {
      const line = await firstLine(child, "the service reporting");
      const reported = JSON.parse(line) as { spec: SandboxSpec; usage: Usage; pausedAt: string; dirs: string[] };
      spec = { ...reported.spec, createdAt: new Date(reported.spec.createdAt), pausedAt: new Date(reported.pausedAt) };
      roots = [...new Set(reported.dirs.map((d) => dirname(d)))];
      const spare = await spareReady(roots, child.pid as number);
      const spareStart = processStartTime(spare.pid);
      assert.ok(
        fs.existsSync(join(dir, "sandboxes", spec.sandboxId, "cgroup-base.json")),
        "the earlier cgroup's counters are kept",
      );

      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
      await until("the spare launcher ends with its service", () => processStartTime(spare.pid) !== spareStart);

      next = driverAt(dir);
      await until(
        "the restart removes the killed service's spare cgroup",
        () => namesStarting(roots, `.spare-${child.pid}-`).length === 0,
      );
      assert.equal((await next.recover(spec)).phase, "paused");
      assertNotLess(await next.usage(spec.sandboxId), reported.usage, "after the restart");
      assert.equal((await next.resume(spec.sandboxId)).phase, "ready");
      const r = await collectExec(next, spec.sandboxId, { command: "/bin/cat", args: ["kept.txt"] });
      assert.equal(r.stdout, "kept\n", r.stderr);
      assertNotLess(await next.usage(spec.sandboxId), reported.usage, "resumed after the restart");
      await next.destroy(spec.sandboxId);
      assert.deepEqual(namesStarting(roots, spec.sandboxId), [], "the sandbox's cgroup is removed");
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await new Promise((r) => child.once("exit", r));
      }
      // A failure before the restart still leaves the killed service's sandbox (it outlives it): a driver ends it.
      if (spec) {
        next ??= driverAt(dir);
        await next.recover(spec).catch(() => {});
        await next.destroy(spec.sandboxId).catch(() => {});
      }
      await next?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    assert.deepEqual(namesStarting(roots, ".spare-"), [], "no spare cgroup left");
    assert.deepEqual(namesStarting(roots, ".retired-"), [], "no retired cgroup left");
  });
});
