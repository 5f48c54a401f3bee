// cgroup limits of the local driver against real hostile workloads: a memory
// bomb, a fork bomb, a CPU hog under a quota and a runaway past max_runtime.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { LocalDriver } from "./local-driver.ts";

const MiB = 1024 * 1024;
let dataDir: string;
let driver: LocalDriver;
const made: string[] = [];

async function sandbox(limits: Parameters<typeof contractSpec>[1]): Promise<string> {
  const spec = contractSpec("local", limits);
  made.push(spec.sandboxId);
  await driver.create(spec);
  assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
  return spec.sandboxId;
}

async function hostHealthy(): Promise<void> {
  // A new sandbox still starts and runs a command, and this process is responsive.
  const id = await sandbox({});
  const r = await collectExec(driver, id, { command: "/bin/echo", args: ["alive"] });
  assert.equal(r.stdout, "alive\n");
  await driver.destroy(id);
}

before(() => {
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-limits-"));
  fs.chmodSync(dataDir, 0o711);
  driver = new LocalDriver({
    dataDir,
    killGraceMs: 300,
    pidsMax: 64,
    cgroupPrefix: `platform-compute-limits-${process.pid}`,
    dieWithService: true,
  });
});

after(async () => {
  for (const id of made) await driver.destroy(id).catch(() => {});
  await driver.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe("local driver limits", () => {
  test("a memory bomb is killed at memory_bytes and reported as out of memory; the sandbox survives", async () => {
    const id = await sandbox({ memoryBytes: 64 * MiB });
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      // Doubles a string until the cgroup's memory limit stops it.
      args: ["-c", "awk 'BEGIN { s = \"xxxxxxxx\"; while (1) { s = s s } }'"],
    });
    assert.equal(r.completed.exitCode, 137, `exit ${r.completed.exitCode}, stderr ${r.stderr}`);
    assert.equal(r.completed.oomKilled, true);
    assert.match(r.stderr, /out of memory/);
    assert.ok(r.completed.usage.memoryPeakBytes <= 64 * MiB + MiB, `peak ${r.completed.usage.memoryPeakBytes}`);
    assert.ok(r.completed.usage.memoryPeakBytes > 32 * MiB, `peak ${r.completed.usage.memoryPeakBytes}`);
    assert.equal((await driver.observe(id)).phase, "ready");
    assert.equal((await collectExec(driver, id, { command: "/bin/echo", args: ["after"] })).stdout, "after\n");
    await hostHealthy();
  });

  test("a fork bomb hits the pids cap, is cancelled without survivors, and the sandbox keeps working", async () => {
    const id = await sandbox({});
    const cg = driver.cgroupOf(id);
    const controller = new AbortController();
    let maxPids = 0;
    let hits = 0;
    const watch = setInterval(() => {
      maxPids = Math.max(maxPids, cg.stats().pids);
      hits = Math.max(hits, cg.pidsLimitHits());
      if (hits > 0) controller.abort();
    }, 20);
    setTimeout(() => controller.abort(), 5000).unref();
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "bomb() { bomb | bomb & }; bomb; sleep 30"],
      signal: controller.signal,
    });
    clearInterval(watch);
    assert.ok(hits > 0, "forks were refused at pids.max");
    assert.ok(maxPids <= 64, `saw ${maxPids} processes`);
    assert.equal(r.completed.cancelled, true);
    // Only the sandbox's own init (bwrap, its pid 1, sleep) is left, and the
    // exec helper's child waiting in the next exec's cgroup.
    assert.ok(cg.pids().length <= 4, `left: ${cg.pids().length}`);
    assert.equal((await collectExec(driver, id, { command: "/bin/echo", args: ["ok"] })).stdout, "ok\n");
    await hostHealthy();
  });

  test("cpu_millis is a CFS quota: a busy loop at 200 millicores gets about a fifth of a core", async () => {
    const id = await sandbox({ cpuMillis: 200 });
    const r = await collectExec(driver, id, {
      command: "/usr/bin/timeout",
      args: ["1", "/bin/sh", "-c", "while :; do :; done"],
    });
    const cpu = r.completed.usage.cpuMs;
    assert.ok(cpu > 50, `cpu_ms ${cpu}`);
    // 1 s of wall time at 0.2 CPU is 200 ms; leave room for period rounding, never near a full core.
    assert.ok(cpu <= 350, `cpu_ms ${cpu} exceeds the 200 millicore quota`);
  });

  test("a runaway stops at max_runtime: the exec ends and the sandbox is FAILED (deadline)", async () => {
    const id = await sandbox({ maxRuntimeMs: 1500 });
    const started = Date.now();
    const r = await collectExec(driver, id, { command: "/bin/sh", args: ["-c", "while :; do :; done"] });
    assert.notEqual(r.completed.exitCode, 0);
    assert.ok(Date.now() - started < 10_000);
    let o = await driver.observe(id);
    for (let i = 0; i < 100 && o.phase === "ready"; i++) {
      await new Promise((r) => setTimeout(r, 50));
      o = await driver.observe(id);
    }
    assert.equal(o.phase, "failed");
    assert.equal(o.reason, "deadline");
    await hostHealthy();
  });

  test("usage comes from the kernel's counters: disk writes through the service and memory peak/average", async () => {
    const id = await sandbox({});
    await driver.writeFile(id, "f.bin", new Uint8Array(300_000), false, 0o644);
    // Read past the page cache, so the bytes come from the workspace's disk.
    await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "dd if=f.bin of=/dev/null bs=64k iflag=direct 2>/dev/null"],
    });
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "head -c 20000000 /dev/zero | (sleep 0.5; cat) > /dev/null"],
    });
    assert.ok(r.completed.usage.memoryPeakBytes > 0);
    assert.ok(r.completed.usage.memoryAvgBytes > 0);
    assert.ok(r.completed.usage.memoryAvgBytes <= r.completed.usage.memoryPeakBytes);
    const u = await driver.usage(id);
    assert.ok(u.diskReadBytes >= 300_000, `disk_read_bytes ${u.diskReadBytes}`);
    assert.equal(u.networkEgressBytes, 0);
    assert.equal(u.networkIngressBytes, 0);
    // The written bytes count once they reach the disk: destroy flushes the workspace first.
    const total = await driver.destroy(id);
    assert.ok(total.diskWriteBytes >= 300_000, `disk_write_bytes ${total.diskWriteBytes}`);
  });

  test("disk counters count what commands do in the workspace: fsync'd, direct and buffered writes, direct reads; not /tmp", async () => {
    const id = await sandbox({});
    const MiB = 1024 * 1024;
    const w = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "dd if=/dev/zero of=big bs=1M count=50 conv=fsync 2>/dev/null && echo ok"],
    });
    assert.equal(w.stdout, "ok\n");
    assert.ok(
      w.completed.usage.diskWriteBytes >= 50 * MiB,
      `exec disk_write_bytes ${w.completed.usage.diskWriteBytes}`,
    );
    // Metadata and journal come on top, not a second copy of the data.
    assert.ok(w.completed.usage.diskWriteBytes < 60 * MiB, `exec disk_write_bytes ${w.completed.usage.diskWriteBytes}`);
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "dd if=big of=/dev/null bs=1M iflag=direct 2>/dev/null && echo ok"],
    });
    assert.ok(r.completed.usage.diskReadBytes >= 50 * MiB, `exec disk_read_bytes ${r.completed.usage.diskReadBytes}`);
    // /tmp is the sandbox's own tmpfs, not the workspace.
    const t = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "dd if=/dev/zero of=/tmp/t bs=1M count=20 conv=fsync 2>/dev/null"],
    });
    assert.ok(t.completed.usage.diskWriteBytes < 1 * MiB, `a /tmp write counted ${t.completed.usage.diskWriteBytes}`);
    const before = await driver.usage(id);
    assert.ok(before.diskWriteBytes >= 50 * MiB && before.diskReadBytes >= 50 * MiB, JSON.stringify(before));
    // A buffered write (no fsync) counts in the sandbox's totals once written back: destroy flushes the workspace first.
    await collectExec(driver, id, { command: "/bin/sh", args: ["-c", "head -c 10485760 /dev/zero > buffered"] });
    const total = await driver.destroy(id);
    assert.ok(
      total.diskWriteBytes - before.diskWriteBytes >= 10 * MiB,
      `buffered write counted ${total.diskWriteBytes - before.diskWriteBytes}`,
    );
  });

  test("an exec's end reads only the cgroup counters its completed event reports; its usage and OOM report stay right", async () => {
    const id = await sandbox({});
    // Files read below the sandbox's cgroups (its execs' cgroups) while the execs run.
    const sandboxDirs = Object.values(driver.cgroupOf(id).dirs).map((d) => `${d}/`);
    const read: string[] = [];
    const cjs = createRequire(import.meta.url)("node:fs") as { readFileSync: typeof fs.readFileSync };
    const original = cjs.readFileSync;
    cjs.readFileSync = ((file: fs.PathOrFileDescriptor, ...rest: unknown[]) => {
      if (typeof file === "string" && sandboxDirs.some((d) => file.startsWith(d))) read.push(file);
      return (original as (...a: unknown[]) => unknown)(file, ...rest);
    }) as typeof fs.readFileSync;
    syncBuiltinESMExports();
    let w: Awaited<ReturnType<typeof collectExec>>;
    let plain: Awaited<ReturnType<typeof collectExec>>;
    try {
      w = await collectExec(driver, id, {
        command: "/bin/sh",
        args: ["-c", "dd if=/dev/zero of=w.bin bs=1M count=4 conv=fsync 2>/dev/null && echo ok"],
      });
      plain = await collectExec(driver, id, { command: "/bin/sh", args: ["-c", "exit 3"] });
    } finally {
      cjs.readFileSync = original;
      syncBuiltinESMExports();
    }
    // The workspace's disk counters give its disk usage; an exit that is not a SIGKILL is never an OOM kill.
    const skipped = read.filter((f) => /\/(blkio\.[^/]*|io\.stat|memory\.oom_control|memory\.events)$/.test(f));
    assert.deepEqual(skipped, []);
    // What is read is what the event reports: the CPU time and the memory peak.
    assert.ok(
      read.some((f) => /\/(cpuacct\.usage|cpu\.stat)$/.test(f)),
      read.join(" "),
    );
    assert.ok(
      read.some((f) => /\/memory\.(max_usage_in_bytes|peak)$/.test(f)),
      read.join(" "),
    );
    assert.equal(w.stdout, "ok\n");
    assert.ok(w.completed.usage.diskWriteBytes >= 4 * MiB, `disk_write_bytes ${w.completed.usage.diskWriteBytes}`);
    assert.ok(w.completed.usage.diskWriteBytes < 8 * MiB, `disk_write_bytes ${w.completed.usage.diskWriteBytes}`);
    assert.ok(w.completed.usage.memoryPeakBytes > 0);
    assert.ok(w.completed.usage.cpuMs >= 0);
    assert.equal(plain.completed.exitCode, 3);
    assert.equal(plain.completed.oomKilled, undefined);
    assert.ok(plain.completed.usage.memoryPeakBytes > 0);
  });
});
