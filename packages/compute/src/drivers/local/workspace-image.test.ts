// The workspace size enforced by the kernel: each sandbox's workspace is its
// own ext4 image (sparse, loop-mounted nosuid,nodev), so a command cannot
// write past it and the host's disk gives no more than the size. Real
// bubblewrap sandboxes, real loop devices.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { SandboxSpec } from "../../driver.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { removeTestCgroups } from "../../testing/test-cgroups.ts";
import { LocalDriver } from "./local-driver.ts";
import { isMountPoint, loopDevicesBackedBy, mountPointsUnder } from "./mount-table.ts";
import { workspaceImageOf } from "./session-workspace.ts";
import { MOUNTS_ROOT, releaseOrphanedMounts, WorkspaceImage } from "./workspace-image.ts";

const MiB = 1024 * 1024;
let dataDir: string;
let driver: LocalDriver;
const made: string[] = [];
const loopsBefore = execFileSync("losetup", ["-a"], { encoding: "utf8" }).split("\n").filter(Boolean).length;

function freeBytes(): number {
  const st = fs.statfsSync(dataDir);
  return st.bavail * st.bsize;
}

/** The spec of each sandbox made here, to find its session's workspace. */
const specs = new Map<string, SandboxSpec>();

async function sandbox(size: string, d = driver): Promise<string> {
  const spec = contractSpec("local");
  spec.workspace.size = size;
  made.push(spec.sandboxId);
  specs.set(spec.sandboxId, spec);
  await d.create(spec);
  assert.equal((await d.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
  return spec.sandboxId;
}

const dir = (id: string) => join(dataDir, "sandboxes", id);
const imageOf = (id: string, spec = specs.get(id) as SandboxSpec) =>
  new WorkspaceImage(workspaceImageOf(dataDir, spec.tenantId, spec.sessionId));
const wsDirOf = (id: string) => dirname(imageOf(id).file);

before(() => {
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-wsimage-"));
  fs.chmodSync(dataDir, 0o711);
  driver = new LocalDriver({
    dataDir,
    killGraceMs: 300,
    cgroupPrefix: `platform-compute-wsimage-${process.pid}`,
    dieWithService: true,
    warmSandboxes: 0,
  });
});

after(async () => {
  for (const id of made) await driver.destroy(id).catch(() => {});
  await driver.close();
  // Sandboxes' namespaces may hold a loop device a moment after they are killed.
  for (let i = 0; i < 100 && loopDevicesBackedBy(dataDir).length > 0; i++) await sleep(50);
  assert.deepEqual(loopDevicesBackedBy(dataDir), [], "no loop device of this suite is left");
  assert.deepEqual(mountPointsUnder(dataDir), [], "nothing is mounted under the data directory");
  const loopsAfter = execFileSync("losetup", ["-a"], { encoding: "utf8" }).split("\n").filter(Boolean).length;
  // Other suites may run at the same time; this one's own devices are checked exactly above.
  if (loopsAfter > loopsBefore) console.error(`losetup -a: ${loopsBefore} devices before, ${loopsAfter} after`);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe("workspace size (local driver)", () => {
  test("64Mi workspace: dd of 200 MiB fails with ENOSPC, the sandbox stays READY, the host loses at most ~70 MiB", async () => {
    const id = await sandbox("64Mi");
    const free = freeBytes();
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "dd if=/dev/zero of=big bs=1M count=200 && sync"],
    });
    assert.notEqual(r.completed.exitCode, 0, r.stderr);
    assert.match(r.stderr, /No space left on device/);
    const written = fs.statSync(join(imageOf(id).mountPoint(), "big")).size;
    assert.ok(written < 64 * MiB, `the file stopped at ${written} bytes`);
    const drop = free - freeBytes();
    assert.ok(drop <= 70 * MiB, `host free space dropped by ${(drop / MiB).toFixed(1)} MiB`);
    const image = fs.statSync(imageOf(id).file);
    assert.equal(image.size, 64 * MiB);
    assert.ok(image.blocks * 512 <= 64 * MiB, `the image takes ${image.blocks * 512} bytes`);
    assert.equal((await driver.observe(id)).phase, "ready");
    const next = await collectExec(driver, id, {
      command: "/bin/sh",
      args: ["-c", "rm big; echo again > small; cat small"],
    });
    assert.equal(next.completed.exitCode, 0, next.stderr);
    assert.equal(next.stdout, "again\n");
  });

  test("WriteFile past the size is RESOURCE_EXHAUSTED (workspace_full) and keeps nothing of the failed write", async () => {
    const id = await sandbox("64Mi");
    const chunk = new Uint8Array(16 * MiB).fill(7);
    let failure: unknown;
    let i = 0;
    for (; i < 8 && !failure; i++) {
      await driver.writeFile(id, `f${i}`, chunk, false, 0o644).catch((err) => {
        failure = err;
      });
    }
    assert.ok(failure instanceof PlatformError, `a write failed (after ${i} files)`);
    assert.equal(failure.code, Code.ResourceExhausted);
    assert.equal(failure.reason, ComputeReason.workspaceFull);
    const failed = (await driver.listFiles(id, "", false, 100)).entries.find((e) => e.path === `f${i - 1}`);
    assert.equal(failed?.size, 0, "the cut-short file gave its blocks back");
    // Appending past the limit is undone too.
    const before = (await driver.readFile(id, "f0", 0, 1)).totalSize;
    await assert.rejects(
      driver.writeFile(id, "f0", chunk, true, 0o644),
      (e: unknown) => e instanceof PlatformError && e.code === Code.ResourceExhausted,
    );
    assert.equal((await driver.readFile(id, "f0", 0, 1)).totalSize, before);
    assert.equal((await driver.observe(id)).phase, "ready");
    await driver.writeFile(id, "f0", new TextEncoder().encode("room again"), false, 0o644);
    const r = await collectExec(driver, id, { command: "/bin/cat", args: ["f0"] });
    assert.equal(r.stdout, "room again");
  });

  test("the image is sparse and its own filesystem: root owned by the sandbox, empty (no lost+found), nosuid,nodev, not noexec", async () => {
    const id = await sandbox("5Gi");
    const image = fs.statSync(imageOf(id).file);
    assert.equal(image.size, 5 * 1024 * MiB);
    assert.ok(image.blocks * 512 < 32 * MiB, `a fresh 5Gi image takes ${((image.blocks * 512) / MiB).toFixed(1)} MiB`);
    assert.equal(image.mode & 0o777, 0o600);
    assert.equal(image.uid, 0);
    assert.ok(imageOf(id).isMounted());
    assert.ok(imageOf(id).mountPoint().startsWith(`${MOUNTS_ROOT}/`));
    assert.deepEqual((await driver.listFiles(id, "", false, 100)).entries, []);
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: [
        "-c",
        "id -u; stat -c %u:%a /workspace; ls -A /workspace | wc -l; grep ' /workspace ' /proc/self/mountinfo; df -k /workspace | tail -1; printf '#!/bin/sh\\necho ran\\n' > s; chmod +x s; ./s",
      ],
    });
    assert.equal(r.completed.exitCode, 0, r.stderr);
    const [uid, owner, count, mountLine, df, ran] = r.stdout.trim().split("\n");
    assert.equal(owner, `${uid}:700`);
    assert.equal(count, "0");
    assert.match(mountLine as string, /\bnosuid\b/);
    assert.match(mountLine as string, /\bnodev\b/);
    assert.doesNotMatch(mountLine as string, /\bnoexec\b/);
    assert.match(mountLine as string, / - ext4 /);
    const sizeKiB = Number((df as string).trim().split(/\s+/)[1]);
    assert.ok(sizeKiB > 4.5 * 1024 * 1024 && sizeKiB <= 5 * 1024 * 1024, `df says ${sizeKiB} KiB`);
    assert.equal(ran, "ran");
  });

  test("destroy unmounts and detaches (also while a sandbox started later runs); GC after the grace deletes the image; nothing remains", async () => {
    const id = await sandbox("64Mi");
    await driver.writeFile(id, "keep.txt", new TextEncoder().encode("kept through the grace"), false, 0o644);
    const image = imageOf(id).file;
    assert.equal(loopDevicesBackedBy(image).length, 1);
    // Its mount namespace was made while id's workspace was mounted: it must not keep it.
    const later = await sandbox("64Mi");
    assert.equal((await collectExec(driver, later, { command: "/bin/true" })).completed.exitCode, 0);
    await driver.destroy(id);
    for (let i = 0; i < 100 && loopDevicesBackedBy(image).length > 0; i++) await sleep(50);
    const mountPoint = imageOf(id).mountPoint();
    assert.equal(isMountPoint(mountPoint), false);
    assert.equal(fs.existsSync(mountPoint), false);
    assert.deepEqual(loopDevicesBackedBy(image), []);
    assert.ok(fs.existsSync(image), "the image is kept for the grace window");
    assert.deepEqual(await driver.collectGarbage(new Date()), []);
    const removed = await driver.collectGarbage(new Date(Date.now() + 25 * 3600_000));
    assert.ok(removed.includes(id));
    assert.equal(fs.existsSync(dir(id)), false);
    assert.equal(fs.existsSync(wsDirOf(id)), false);
  });

  test("GC also unmounts and detaches a workspace a destroy left mounted (a crash in between)", async () => {
    const id = await sandbox("64Mi");
    await driver.destroy(id);
    const image = imageOf(id).file;
    // What a crash between marking and unmounting leaves: the image mounted again.
    const mountPoint = imageOf(id).mountPoint();
    fs.mkdirSync(mountPoint);
    execFileSync("mount", ["-t", "ext4", "-o", "loop,nosuid,nodev", image, mountPoint]);
    assert.equal(loopDevicesBackedBy(image).length, 1);
    const removed = await driver.collectGarbage(new Date(Date.now() + 25 * 3600_000));
    assert.ok(removed.includes(id));
    // The kernel detaches an autoclear loop device after its last unmount, not always before umount returns.
    for (let i = 0; i < 100 && loopDevicesBackedBy(image).length > 0; i++) await sleep(50);
    assert.deepEqual(loopDevicesBackedBy(image), []);
    assert.equal(isMountPoint(mountPoint), false);
    assert.equal(fs.existsSync(mountPoint), false);
    assert.equal(fs.existsSync(dir(id)), false);
    assert.equal(fs.existsSync(wsDirOf(id)), false);
  });

  test("a restarted driver re-attaches a sandbox with its workspace mounted (mounted again if it was not), same filesystem", async () => {
    const id = await sandbox("64Mi");
    await driver.writeFile(id, "before.txt", new TextEncoder().encode("from before"), false, 0o644);
    const ws = imageOf(id).mountPoint();
    execFileSync("umount", [ws]);
    assert.equal(isMountPoint(ws), false);
    const second = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: `platform-compute-wsimage-${process.pid}`,
      warmSandboxes: 0,
    });
    try {
      const spec = specs.get(id) as SandboxSpec;
      assert.equal((await second.recover(spec)).phase, "ready");
      assert.ok(isMountPoint(ws));
      // One device: the loop the sandbox still holds was reused, not a second view of the image.
      assert.equal(loopDevicesBackedBy(imageOf(id).file).length, 1);
      assert.equal(new TextDecoder().decode((await second.readFile(id, "before.txt", 0, 100)).data), "from before");
      await second.writeFile(id, "after.txt", new TextEncoder().encode("seen inside"), false, 0o644);
      const r = await collectExec(second, id, { command: "/bin/cat", args: ["after.txt", "before.txt"] });
      assert.equal(r.stdout, "seen insidefrom before");
    } finally {
      await second.close();
    }
  });

  test("a sandbox whose processes die releases its workspace at once; a restarted driver finds it failed and mounts it again for its files", async () => {
    const id = await sandbox("64Mi");
    await driver.writeFile(id, "kept.txt", new TextEncoder().encode("still here"), false, 0o644);
    const image = imageOf(id);
    const state = JSON.parse(fs.readFileSync(join(dir(id), "state.json"), "utf8")) as { initPid: number };
    process.kill(state.initPid, "SIGKILL");
    for (let i = 0; i < 100 && (await driver.observe(id)).phase === "ready"; i++) await sleep(50);
    assert.equal((await driver.observe(id)).phase, "failed");
    // Nothing runs on it any more: its mount and loop device go; the image stays for the grace.
    for (let i = 0; i < 100 && loopDevicesBackedBy(image.file).length > 0; i++) await sleep(50);
    assert.equal(image.isMounted(), false);
    assert.deepEqual(loopDevicesBackedBy(image.file), []);
    const second = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: `platform-compute-wsimage-${process.pid}`,
      warmSandboxes: 0,
    });
    try {
      const spec = specs.get(id) as SandboxSpec;
      const o = await second.recover(spec);
      assert.equal(o.phase, "failed");
      assert.equal(o.reason, "exited");
      assert.equal(new TextDecoder().decode((await second.readFile(id, "kept.txt", 0, 100)).data), "still here");
      await second.destroy(id);
      assert.equal(image.isMounted(), false);
      assert.deepEqual(loopDevicesBackedBy(image.file), []);
    } finally {
      await second.close();
    }
  });

  test("a create that cannot provision leaves nothing behind", async () => {
    const spec = contractSpec("local");
    spec.workspace.size = "64Mi";
    // A directory where the new workspace's owner record goes makes its preparation fail.
    const wsDir = dirname(imageOf(spec.sandboxId, spec).file);
    fs.mkdirSync(join(wsDir, "owner.json"), { recursive: true });
    await assert.rejects(driver.create(spec), (e: unknown) => e instanceof PlatformError && e.code === Code.Internal);
    assert.deepEqual(loopDevicesBackedBy(dir(spec.sandboxId)), []);
    assert.deepEqual(loopDevicesBackedBy(wsDir), []);
    assert.equal(fs.existsSync(dir(spec.sandboxId)), false);
    assert.equal(fs.existsSync(wsDir), false);
  });
});

describe("a killed service's workspace mounts", () => {
  after(async () => {
    // The service killed with its sandbox leaves that sandbox's cgroup under the prefix.
    assert.deepEqual(await removeTestCgroups(`platform-compute-orphans-${process.pid}`), []);
  });

  /** A driver in another process with one 64Mi sandbox; resolves with its id once READY. */
  async function serviceWithSandbox(dataDir: string, dieWithService: boolean) {
    const driverUrl = new URL("./local-driver.ts", import.meta.url).href;
    const contractUrl = new URL("../../testing/driver-contract.ts", import.meta.url).href;
    const code = `
      import { LocalDriver } from ${JSON.stringify(driverUrl)};
      import { contractSpec } from ${JSON.stringify(contractUrl)};
      const d = new LocalDriver({ dataDir: ${JSON.stringify(dataDir)}, killGraceMs: 300, cgroupPrefix: "platform-compute-orphans-${process.pid}", dieWithService: ${dieWithService}, warmSandboxes: 0 });
      const spec = contractSpec("local");
      spec.workspace.size = "64Mi";
      await d.create(spec);
      await d.waitSettled(spec.sandboxId);
      console.log(JSON.stringify(spec));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const spec = await new Promise<SandboxSpec>((resolve, reject) => {
      child.stdout.once("data", (d: Buffer) => resolve(JSON.parse(d.toString().trim()) as SandboxSpec));
      child.once("exit", (c) => reject(new Error(`child exited ${c}`)));
    });
    spec.createdAt = new Date(spec.createdAt);
    return {
      child,
      id: spec.sandboxId,
      spec,
      image: new WorkspaceImage(workspaceImageOf(dataDir, spec.tenantId, spec.sessionId)),
    };
  }

  /** Runs `echo alive` in a sandbox of a stopped service, through a driver that re-attaches it. */
  async function collectExecIn(spec: SandboxSpec, dataDir: string): Promise<string> {
    const d = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: `platform-compute-orphans-${process.pid}`,
      warmSandboxes: 0,
    });
    const id = spec.sandboxId;
    try {
      assert.equal((await d.recover(spec)).phase, "ready");
      return (await collectExec(d, id, { command: "/bin/echo", args: ["alive"] })).stdout;
    } finally {
      await d.close();
    }
  }

  test("one whose sandboxes died with it (keep=false) is released by the next sweep; one kept for surviving sandboxes is not", async () => {
    const dirs = [
      fs.mkdtempSync(join(tmpdir(), "compute-orphans-")),
      fs.mkdtempSync(join(tmpdir(), "compute-orphans-")),
    ];
    for (const d of dirs) fs.chmodSync(d, 0o711);
    const ending = await serviceWithSandbox(dirs[0] as string, true);
    const kept = await serviceWithSandbox(dirs[1] as string, false);
    try {
      const endingPoint = ending.image.mountPoint();
      const keptPoint = kept.image.mountPoint();
      assert.ok(isMountPoint(endingPoint) && isMountPoint(keptPoint));
      ending.child.kill("SIGKILL");
      kept.child.kill("SIGKILL");
      await new Promise((r) => setTimeout(r, 300));
      // The sweep is host-wide: a driver starting in another test file meanwhile may release the killed
      // service's mount first (seen in CI). Either way it is released; the kept one never is.
      const released = await releaseOrphanedMounts();
      assert.ok(released.includes(endingPoint) || !isMountPoint(endingPoint), "the killed service's mount stays");
      assert.ok(!released.includes(keptPoint));
      assert.equal(isMountPoint(endingPoint), false);
      for (let i = 0; i < 100 && loopDevicesBackedBy(ending.image.file).length > 0; i++) await sleep(50);
      assert.deepEqual(loopDevicesBackedBy(ending.image.file), []);
      assert.ok(isMountPoint(keptPoint), "its sandbox still runs and uses it");
      assert.deepEqual((await collectExecIn(kept.spec, dirs[1] as string)).trim(), "alive");
      // Its sandbox directory and workspace deleted (image and all): nobody can use that mount again.
      fs.rmSync(join(dirs[1] as string, "sandboxes", kept.id), { recursive: true, force: true });
      fs.rmSync(dirname(kept.image.file), { recursive: true, force: true });
      const releasedAfter = await releaseOrphanedMounts();
      assert.ok(releasedAfter.includes(keptPoint) || !isMountPoint(keptPoint), "a mount nobody can use stays");
      assert.equal(isMountPoint(keptPoint), false);
    } finally {
      // The kept sandbox outlived its service: recovered (or found lost, its directory gone) and ended.
      const cleanup = new LocalDriver({
        dataDir: dirs[1] as string,
        killGraceMs: 300,
        cgroupPrefix: `platform-compute-orphans-${process.pid}`,
        warmSandboxes: 0,
      });
      await cleanup.recover(kept.spec).catch(() => {});
      await cleanup.destroy(kept.id).catch(() => {});
      await cleanup.close();
      for (let i = 0; i < 100 && loopDevicesBackedBy(dirs[1] as string).length > 0; i++) await sleep(50);
      assert.deepEqual(loopDevicesBackedBy(dirs[1] as string), []);
      for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    }
  });
});

describe("warm sandboxes and workspace sizes", () => {
  const prefix = `platform-compute-wswarm-${process.pid}`;
  let warm: LocalDriver;
  const mine: string[] = [];
  before(() => {
    warm = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: prefix,
      dieWithService: true,
      warmSandboxes: 1,
      defaultWorkspaceSize: "96Mi",
    });
  });
  after(async () => {
    for (const id of mine) await warm.destroy(id).catch(() => {});
    await warm.close();
  });

  const dfKiB = async (id: string) => {
    const r = await collectExec(warm, id, { command: "/bin/sh", args: ["-c", "df -k /workspace | tail -1"] });
    return Number(r.stdout.trim().split(/\s+/)[1]);
  };
  const readyWarm = () =>
    fs
      .readdirSync(join(dataDir, "sandboxes"))
      .filter((n) => n.startsWith(".warm-") && fs.existsSync(join(dataDir, "sandboxes", n, "state.json")));

  test("only the default size adopts a warm sandbox (with a workspace of that size); another size gets its own", async () => {
    for (let i = 0; i < 400 && readyWarm().length === 0; i++) await sleep(25);
    assert.equal(readyWarm().length, 1);
    const other = contractSpec("local");
    other.workspace.size = "48Mi";
    mine.push(other.sandboxId);
    await warm.create(other);
    assert.equal((await warm.observe(other.sandboxId)).phase, "starting", "not adopted");
    assert.equal((await warm.waitSettled(other.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
    const otherKiB = await dfKiB(other.sandboxId);
    assert.ok(otherKiB <= 48 * 1024 && otherKiB > 0.8 * 48 * 1024, `48Mi workspace: df ${otherKiB} KiB`);
    for (const size of ["", "96Mi"]) {
      for (let i = 0; i < 400 && readyWarm().length === 0; i++) await sleep(25);
      const spec = contractSpec("local");
      spec.workspace.size = size;
      mine.push(spec.sandboxId);
      await warm.create(spec);
      assert.equal((await warm.observe(spec.sandboxId)).phase, "ready", `size ${JSON.stringify(size)} adopts`);
      const kiB = await dfKiB(spec.sandboxId);
      assert.ok(kiB <= 96 * 1024 && kiB > 0.8 * 96 * 1024, `96Mi workspace: df ${kiB} KiB`);
      assert.ok(imageOf(spec.sandboxId, spec).isMounted(), "adopted with its mounted image");
      await warm.writeFile(spec.sandboxId, "x", new TextEncoder().encode("y"), false, 0o644);
    }
  });
});

test("the workspaces' mount root has room for tens of thousands of workspaces, grown in place when an older service mounted it small", async () => {
  // 4 MiB held ~500 workspaces' mount points and owner records; the 501st create failed with ENOSPC.
  const dir = fs.mkdtempSync(join(tmpdir(), "ws-root-"));
  try {
    const image = new WorkspaceImage(join(dir, "workspace.img"));
    await image.create(16 * 1024 * 1024, { uid: 0, gid: 0 });
    const { blocks, bsize } = fs.statfsSync(MOUNTS_ROOT);
    assert.ok(blocks * bsize >= 256 * 1024 * 1024, `${MOUNTS_ROOT} holds ${(blocks * bsize) >> 20} MiB`);
    await image.remove();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
