// Sandboxes started ahead and adopted by create: renamed to the new id with
// its limits, usable at once, replaced, cleaned up on close and after a crash.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { LocalDriver } from "./local-driver.ts";

const MiB = 1024 * 1024;

describe("local driver warm sandboxes", () => {
  let dataDir: string;
  const prefix = `platform-compute-warm-${process.pid}`;
  const drivers: LocalDriver[] = [];
  const made: Array<[LocalDriver, string]> = [];

  const driver = (warmSandboxes: number) => {
    const d = new LocalDriver({ dataDir, killGraceMs: 300, cgroupPrefix: prefix, dieWithService: true, warmSandboxes });
    drivers.push(d);
    return d;
  };
  const warmDirs = () => fs.readdirSync(join(dataDir, "sandboxes")).filter((n) => n.startsWith(".warm-"));
  const readyWarm = () => warmDirs().filter((n) => fs.existsSync(join(dataDir, "sandboxes", n, "state.json")));
  async function until(what: string, check: () => boolean): Promise<void> {
    for (let i = 0; i < 400 && !check(); i++) await sleep(25);
    assert.ok(check(), what);
  }

  before(() => {
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-warm-"));
    fs.chmodSync(dataDir, 0o711);
  });
  after(async () => {
    for (const [d, id] of made) await d.destroy(id).catch(() => {});
    for (const d of drivers) await d.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("create adopts a started sandbox: READY at once, its limits, files and execs under the new id; the pool refills", async () => {
    const d = driver(1);
    await until("a warm sandbox is started", () => readyWarm().length === 1);
    const [warmName] = readyWarm();
    const warmUid = JSON.parse(
      fs.readFileSync(join(dataDir, "sandboxes", warmName as string, "state.json"), "utf8"),
    ).uid;
    const spec = contractSpec("local", { memoryBytes: 96 * MiB });
    made.push([d, spec.sandboxId]);
    await d.create(spec);
    assert.equal((await d.observe(spec.sandboxId)).phase, "ready", "no wait for a new bwrap");
    assert.equal(fs.existsSync(join(dataDir, "sandboxes", warmName as string)), false);
    const memory = d.cgroupOf(spec.sandboxId).dirs.memory;
    if (memory) assert.equal(fs.readFileSync(join(memory, "memory.limit_in_bytes"), "utf8").trim(), String(96 * MiB));
    await d.writeFile(spec.sandboxId, "hello.txt", new TextEncoder().encode("hi"), false, 0o644);
    const r = await collectExec(d, spec.sandboxId, {
      command: "/bin/sh",
      args: ["-c", "cat hello.txt; echo; id -u; grep -E '^[0-9]+:memory:' /proc/self/cgroup"],
    });
    assert.equal(r.completed.exitCode, 0, r.stderr);
    const [text, uid, cgroup] = r.stdout.trim().split("\n");
    assert.equal(text, "hi");
    assert.equal(Number(uid), warmUid);
    assert.match(cgroup as string, /:\/exec-\d+$/);
    if (memory)
      assert.notEqual(
        fs.readFileSync(join(memory, "cgroup.procs"), "utf8").trim(),
        "",
        "the init moved with the rename",
      );
    await until("the pool is refilled", () => readyWarm().length === 1 && readyWarm()[0] !== warmName);
  });

  test("a sandbox with another mount path is built for it, not adopted", async () => {
    const d = drivers[0] as LocalDriver;
    await until("a warm sandbox is started", () => readyWarm().length === 1);
    const spec = contractSpec("local");
    spec.workspace.mountPath = "/elsewhere";
    made.push([d, spec.sandboxId]);
    await d.create(spec);
    assert.equal((await d.observe(spec.sandboxId)).phase, "starting");
    assert.equal((await d.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
    assert.equal(readyWarm().length, 1, "the warm one is still there");
  });

  test("a restarted service keeps adopted sandboxes (with their uid) and removes the warm ones it did not hand out", async () => {
    const first = drivers[0] as LocalDriver;
    const [adoptedDriver, adopted] = made[0] as [LocalDriver, string];
    assert.equal(adoptedDriver, first);
    const before = warmDirs();
    assert.equal(before.length, 1);
    const uid = (await collectExec(first, adopted, { command: "/usr/bin/id", args: ["-u"] })).stdout;
    const second = driver(0);
    await until("the old warm sandbox is removed", () => warmDirs().length === 0);
    const spec = contractSpec("local");
    spec.sandboxId = adopted;
    assert.equal((await second.recover(spec)).phase, "ready");
    assert.equal((await collectExec(second, adopted, { command: "/usr/bin/id", args: ["-u"] })).stdout, uid);
  });

  test("close removes warm sandboxes: processes, cgroups and directories", async () => {
    const d = driver(2);
    await until("two warm sandboxes are started", () => readyWarm().length === 2);
    const names = readyWarm();
    await d.close();
    assert.deepEqual(warmDirs(), []);
    const root = (drivers[0] as LocalDriver).cgroupOf(made[0]?.[1] as string).dirs.pids;
    if (root) for (const n of names) assert.equal(fs.existsSync(join(root, "..", n)), false);
  });

  test("adopting a sandbox whose next exec slot failed while it moved neither crashes nor fails the exec", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    const d = driver(1);
    const spec = contractSpec("local");
    try {
      type WarmView = { observation: { phase: string }; slots: { spare?: Promise<unknown> } };
      const warm = (d as unknown as { warm: { sandboxes: WarmView[] } }).warm.sandboxes;
      await until("this driver's warm sandbox is ready", () => warm[0]?.observation.phase === "ready");
      // What a slot whose mkdir raced the rename looks like (ENOENT under the old name).
      const failed = Promise.reject(Object.assign(new Error("ENOENT: mkdir under the old name"), { code: "ENOENT" }));
      failed.catch(() => {});
      (warm[0] as WarmView).slots.spare = failed;
      await d.create(spec);
      await sleep(50);
      assert.deepEqual(unhandled, []);
      const r = await collectExec(d, spec.sandboxId, { command: "/bin/echo", args: ["ok"] });
      assert.equal(r.completed.exitCode, 0, r.stderr);
      assert.equal(r.stdout, "ok\n");
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await d.destroy(spec.sandboxId).catch(() => {});
      // Its refilled warm sandbox would count in the next tests.
      await d.close();
    }
  });

  test("an adopted sandbox's place is refilled once its first exec ended, not only after the pool's delay", async () => {
    const d = driver(1);
    const spec = contractSpec("local");
    try {
      const pool = (d as unknown as { warm: { sandboxes: Array<{ observation: { phase: string } }> } }).warm;
      await until("this driver's warm sandbox is ready", () => pool.sandboxes[0]?.observation.phase === "ready");
      await d.create(spec);
      assert.equal(pool.sandboxes.length, 0, "taken, not refilled yet");
      const started = performance.now();
      const r = await collectExec(d, spec.sandboxId, { command: "/bin/true", args: [] });
      assert.equal(r.completed.exitCode, 0, r.stderr);
      await new Promise((resolve) => setImmediate(resolve));
      // The pool's own delay (100 ms) would refill it too: only an exec quicker than that tells them apart.
      if (performance.now() - started < 90) assert.equal(pool.sandboxes.length, 1, "refilled after the exec");
    } finally {
      await d.destroy(spec.sandboxId).catch(() => {});
      await d.close();
    }
  });
});
