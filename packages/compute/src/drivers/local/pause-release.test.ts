// test-timeout: 180000
// A paused sandbox gives its memory back (issue 18): after releasePausedAfterMs
// frozen, its processes are ended and its cgroup emptied, the workspace and
// the record's PAUSED kept; a resume starts it again on the same files, and a
// restart of the service finds it still paused and resumable. Real local
// driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ComputeDomain } from "../../service/compute-domain.ts";
import { MemorySandboxStore } from "../../store/sandbox-store.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";
import { loopDevicesBackedBy } from "./mount-table.ts";

const PREFIX = `platform-compute-pause-release-${process.pid}`;

const driverAt = (dataDir: string) =>
  new LocalDriver({
    dataDir,
    killGraceMs: 300,
    cgroupPrefix: PREFIX,
    dieWithService: true,
    warmSandboxes: 0,
    releasePausedAfterMs: 0,
  });

test("a released pause ends the processes and frees their memory; resume and a restart keep the files", async () => {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-pause-release-"));
  fs.chmodSync(dir, 0o711);
  let driver = driverAt(dir);
  const spec = contractSpec("local");
  spec.workspace.size = "64Mi";
  try {
    await driver.create(spec);
    assert.equal((await driver.waitSettled(spec.sandboxId)).phase, "ready");
    const id = spec.sandboxId;
    const wrote = await collectExec(driver, id, { command: "/bin/sh", args: ["-c", "echo kept > kept.txt; echo $$"] });
    assert.equal(wrote.completed.exitCode, 0);
    const cgroup = driver.cgroupOf(id);
    const before = cgroup.memoryBytes();
    assert.ok(!cgroup.isEmpty(), "a running sandbox has processes");

    await driver.pause(id);
    assert.equal((await driver.observe(id)).phase, "paused");
    await until("the paused sandbox's processes have ended", () => driver.cgroupOf(id).isEmpty());
    // The kernel frees what ended processes held a little later (827 KiB running, 37-155 KiB released, measured).
    await until(`its memory is given back (${before} B running)`, () => driver.cgroupOf(id).memoryBytes() < before / 2);
    const released = driver.cgroupOf(id).memoryBytes();
    assert.equal((await driver.observe(id)).phase, "paused", "still paused once released");
    assert.ok((await driver.usage(id)).cpuMs >= 0, "usage readable while released");
    await assert.rejects(collectExec(driver, id, { command: "/bin/true" }), "no exec on a paused sandbox");

    assert.equal((await driver.resume(id)).phase, "ready");
    const read = await collectExec(driver, id, { command: "/bin/cat", args: ["kept.txt"] });
    assert.equal(read.stdout, "kept\n");
    assert.ok(!driver.cgroupOf(id).isEmpty(), "running again");
    console.log(`cgroup memory: running ${before} B, released ${released} B`);

    // Released, then the service stops (its sandboxes end with it) and starts again: still paused, resumable.
    await driver.pause(id);
    await until("released again", () => driver.cgroupOf(id).isEmpty());
    await driver.close();
    driver = driverAt(dir);
    const again = await driver.recover({ ...spec, pausedAt: new Date(Date.now() - 1000), pausedMs: 0 });
    assert.equal(again.phase, "paused");
    assert.equal((await driver.resume(id)).phase, "ready");
    assert.equal((await collectExec(driver, id, { command: "/bin/cat", args: ["kept.txt"] })).stdout, "kept\n");

    await driver.destroy(id);
    assert.ok(driver.cgroupOf(id).isEmpty());
    const image = join(dir, "workspaces", `${spec.tenantId}_${spec.sessionId}`, "workspace.img");
    // The kernel detaches an autoclear loop device once the last mount of it is gone, which for the
    // mount namespace of the sandbox's killed processes can trail their exit (seen under CI's load).
    await until("no loop device left", () => loopDevicesBackedBy(image).length === 0, 10_000);
  } finally {
    await driver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** What a sandbox is, seen from inside and from the host: its uid, cgroups, network namespace and processes. */
async function identity(driver: LocalDriver, id: string) {
  const live = (driver as unknown as { sandboxes: Map<string, { initPid?: number; uid: number }> }).sandboxes.get(id);
  assert.ok(live?.initPid, "a running init");
  // Inside: the uid, the network interfaces, the loopback answering, and the init's name (pid 2, under bwrap's pid 1).
  const script = [
    "id -u",
    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '; echo",
    '/usr/bin/perl -MIO::Socket::INET -e \'$l = IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1:4242") or die "$!"; IO::Socket::INET->new("127.0.0.1:4242") or die "$!"; print "loopback answers\\n"\'',
    "cat /proc/2/comm",
  ].join("; ");
  const r = await collectExec(driver, id, { command: "/bin/sh", args: ["-c", script] });
  assert.equal(r.completed.exitCode, 0, r.stderr);
  const [uid, interfaces, loopback, init] = r.stdout.trim().split("\n");
  const cgroup = driver.cgroupOf(id);
  const v1 = cgroup.version === 1;
  const memoryDir = (v1 ? cgroup.dirs.memory : cgroup.dirs.unified) as string;
  const memoryLimit = fs.readFileSync(join(memoryDir, v1 ? "memory.limit_in_bytes" : "memory.max"), "utf8").trim();
  return {
    uid: Number(uid),
    liveUid: live.uid,
    interfaces: interfaces?.trim(),
    loopback,
    init,
    // Every cgroup of the sandbox (one per v1 hierarchy) holds its init.
    initInCgroups: cgroup
      .procsFiles()
      .every((f) => fs.readFileSync(f, "utf8").split("\n").includes(String(live.initPid))),
    memoryLimit: Number(memoryLimit),
    netns: fs.readlinkSync(`/proc/${live.initPid}/ns/net`),
  };
}

test("a released sandbox starts again as itself: its uid, cgroups and limits; a network namespace of its own with only its loopback", async () => {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-pause-release-"));
  fs.chmodSync(dir, 0o711);
  const driver = driverAt(dir);
  const spec = contractSpec("local", { memoryBytes: 200 * 1024 * 1024 });
  spec.workspace.size = "64Mi";
  const id = spec.sandboxId;
  try {
    await driver.create(spec);
    assert.equal((await driver.waitSettled(id)).phase, "ready");
    const before = await identity(driver, id);
    await driver.pause(id);
    await until("released", () => driver.cgroupOf(id).isEmpty());
    assert.equal((await driver.resume(id)).phase, "ready");
    const after = await identity(driver, id);
    for (const [round, seen] of [
      ["fresh", before],
      ["resumed", after],
    ] as const) {
      assert.equal(seen.uid, seen.liveUid, `${round}: the sandbox's own uid`);
      assert.equal(seen.interfaces, "lo", `${round}: only a loopback`);
      assert.equal(seen.loopback, "loopback answers", `${round}: the loopback is up`);
      assert.equal(seen.init, "sandbox-init", `${round}: the built init runs (no shell, no sleep)`);
      assert.ok(seen.initInCgroups, `${round}: the init is in every cgroup of the sandbox`);
      assert.equal(seen.memoryLimit, 200 * 1024 * 1024, `${round}: the sandbox's memory limit`);
      assert.notEqual(seen.netns, fs.readlinkSync("/proc/self/ns/net"), `${round}: not the host's network`);
    }
    assert.equal(after.uid, before.uid, "the same uid after the resume");
    await driver.destroy(id);
  } finally {
    await driver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("through the domain: an exec on a released sandbox starts it again, READY, with its files", async () => {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-pause-release-"));
  fs.chmodSync(dir, 0o711);
  const driver = driverAt(dir);
  const store = new MemorySandboxStore();
  const domain = new ComputeDomain({
    driver,
    store,
    defaults: { image: "local", storageClass: "", workspaceSize: "64Mi" },
    idlePauseMs: 0,
  });
  try {
    await domain.start();
    const { sandboxId } = await domain.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() });
    await domain.writeFile(sandboxId, "note", new TextEncoder().encode("kept"));
    assert.equal(await domain.pauseSandbox(sandboxId), "PAUSED");
    await until("released", () => driver.cgroupOf(sandboxId).isEmpty());
    let out = "";
    for await (const e of domain.execCommand({ sandboxId, command: "/bin/cat", args: ["note"] }))
      if (e.type === "stdout") out += new TextDecoder().decode(e.data);
    assert.equal(out, "kept");
    assert.equal((await domain.describeSandbox(sandboxId)).status, "READY");
    assert.equal((await store.get(sandboxId))?.status, "READY");
    await domain.destroySandbox(sandboxId);
  } finally {
    await domain.stop();
    await driver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
