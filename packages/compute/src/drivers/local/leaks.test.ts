// What sandboxes and services leave on the host once they end: cgroups, the
// exec helper's socket directories, workspaces of failed sandboxes. Real
// local driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { DELETE_AFTER_KEY, type SandboxSpec } from "../../driver.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { firstLine } from "../../testing/first-line.ts";
import { until } from "../../testing/until.ts";
import { LocalDriver } from "./local-driver.ts";
import { processStartTime } from "./sandbox-layout.ts";
import { removeStaleSocketDirs } from "./socket-dir.ts";

const PREFIX = `platform-compute-leaks-${process.pid}`;
const DAY_AND_A_BIT = 24 * 3600_000 + 60_000;

function dataDir(): string {
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-leaks-"));
  fs.chmodSync(dir, 0o711);
  return dir;
}

function driverOn(dir: string, extra: Partial<ConstructorParameters<typeof LocalDriver>[0]> = {}): LocalDriver {
  return new LocalDriver({
    dataDir: dir,
    killGraceMs: 300,
    cgroupPrefix: PREFIX,
    dieWithService: true,
    warmSandboxes: 0,
    ...extra,
  });
}

const exists = (p: string) => fs.existsSync(p);

/** A driver in another process with one READY 64Mi sandbox that has run a command; killed -9 by the test. */
async function serviceWithSandbox(dir: string) {
  const driverUrl = new URL("./local-driver.ts", import.meta.url).href;
  const contractUrl = new URL("../../testing/driver-contract.ts", import.meta.url).href;
  const code = `
    import { dirname } from "node:path";
    import { LocalDriver } from ${JSON.stringify(driverUrl)};
    import { collectExec, contractSpec } from ${JSON.stringify(contractUrl)};
    const d = new LocalDriver({ dataDir: ${JSON.stringify(dir)}, killGraceMs: 300, cgroupPrefix: ${JSON.stringify(PREFIX)}, dieWithService: true, warmSandboxes: 0 });
    const spec = contractSpec("local");
    spec.workspace.size = "64Mi";
    await d.create(spec);
    await d.waitSettled(spec.sandboxId);
    await collectExec(d, spec.sandboxId, { command: "/bin/sh", args: ["-c", "echo kept > kept.txt"] });
    console.log(JSON.stringify({ spec, socketDir: d.helper.socketDir, cgroupDirs: d.cgroupOf(spec.sandboxId).procsFiles().map((f) => dirname(f)) }));
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await firstLine(child, "the child reporting its sandbox");
  const parsed = JSON.parse(line) as { spec: SandboxSpec; socketDir: string; cgroupDirs: string[] };
  parsed.spec.createdAt = new Date(parsed.spec.createdAt);
  return { child, ...parsed };
}

describe("leaks", () => {
  test("after kill -9 of a service: its sandbox is FAILED (lost) with a delete-after and collected by GC; its socket directory and empty cgroups go at the next start", async () => {
    const dir = dataDir();
    const killed = await serviceWithSandbox(dir);
    const sandboxDir = join(dir, "sandboxes", killed.spec.sandboxId);
    try {
      killed.child.kill("SIGKILL");
      // The sandbox dies with its service (die-with-parent); its cgroups stay behind, empty.
      await until("the killed service's sandbox ends", () =>
        killed.cgroupDirs.every((d) => fs.readFileSync(join(d, "cgroup.procs"), "utf8") === ""),
      );
      assert.ok(exists(killed.socketDir), "a killed service removes nothing itself");
      assert.ok(killed.cgroupDirs.every(exists));

      const next = driverOn(dir);
      try {
        // At start, or soon after: the killed sandbox's zombies keep its cgroup busy until they are reaped.
        await until("the empty cgroups are removed at start", () => killed.cgroupDirs.filter(exists).length === 0);
        const o = await next.recover(killed.spec);
        assert.equal(
          o.phase,
          "failed",
          JSON.stringify({
            o,
            state: fs.readFileSync(join(sandboxDir, "state.json"), "utf8"),
            procs: killed.cgroupDirs.map((d) => fs.existsSync(d)),
          }),
        );
        assert.equal(o.reason, "lost");
        await until("the dead service's socket directory is removed", () => !exists(killed.socketDir));
        const marks = JSON.parse(fs.readFileSync(join(sandboxDir, "annotations.json"), "utf8")) as Record<
          string,
          string
        >;
        const after = Date.parse(marks[DELETE_AFTER_KEY] ?? "");
        assert.ok(after > Date.now() + 23 * 3600_000, `delete-after ${marks[DELETE_AFTER_KEY]}`);
        assert.deepEqual(await next.collectGarbage(new Date()), [], "kept for the grace window");
        const wsDir = join(dir, "workspaces", `${killed.spec.tenantId}_${killed.spec.sessionId}`);
        assert.ok(exists(join(wsDir, "workspace.img")));
        assert.ok(exists(join(wsDir, "annotations.json")), "the session's workspace is marked too");
        assert.deepEqual(
          (await next.collectGarbage(new Date(Date.now() + DAY_AND_A_BIT))).sort(),
          [killed.spec.sandboxId, `session:${killed.spec.tenantId}_${killed.spec.sessionId}`].sort(),
        );
        assert.equal(exists(sandboxDir), false);
        assert.equal(exists(wsDir), false);
      } finally {
        await next.close();
      }
    } finally {
      if (killed.child.exitCode === null) killed.child.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("after kill -9 of a service, the session's next sandbox mounts the same workspace and clears its mark", async () => {
    const dir = dataDir();
    const killed = await serviceWithSandbox(dir);
    const wsDir = join(dir, "workspaces", `${killed.spec.tenantId}_${killed.spec.sessionId}`);
    try {
      killed.child.kill("SIGKILL");
      await until("the killed service's sandbox ends", () =>
        killed.cgroupDirs.every((d) => !exists(d) || fs.readFileSync(join(d, "cgroup.procs"), "utf8") === ""),
      );
      const next = driverOn(dir);
      try {
        assert.equal((await next.recover(killed.spec)).phase, "failed");
        assert.ok(exists(join(wsDir, "annotations.json")), "unused: marked for collection");
        const spec = { ...contractSpec("local"), tenantId: killed.spec.tenantId, sessionId: killed.spec.sessionId };
        await next.create(spec);
        // The whole observation on failure: a fresh-clone CI run saw "failed" here once (passing alone).
        const settled = await next.waitSettled(spec.sandboxId, AbortSignal.timeout(30_000));
        assert.equal(settled.phase, "ready", JSON.stringify(settled));
        assert.equal(exists(join(wsDir, "annotations.json")), false, "used again: the mark is gone");
        assert.equal(
          (await collectExec(next, spec.sandboxId, { command: "/bin/cat", args: ["kept.txt"] })).stdout,
          "kept\n",
        );
        // The workspace a sandbox uses is never collected, however late.
        assert.ok(
          !(await next.collectGarbage(new Date(Date.now() + 365 * 86400_000))).some((n) => n.startsWith("session:")),
        );
        assert.equal(
          (await collectExec(next, spec.sandboxId, { command: "/bin/cat", args: ["kept.txt"] })).stdout,
          "kept\n",
        );
        await next.destroy(spec.sandboxId);
        assert.ok(exists(join(wsDir, "annotations.json")));
        const removed = await next.collectGarbage(new Date(Date.now() + DAY_AND_A_BIT));
        assert.ok(removed.includes(`session:${killed.spec.tenantId}_${killed.spec.sessionId}`), removed.join(","));
        assert.equal(exists(wsDir), false);
      } finally {
        await next.close();
      }
    } finally {
      if (killed.child.exitCode === null) killed.child.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("at start, a sandbox directory recovery never reached and a workspace no live sandbox uses get a delete-after; live ones keep none", async () => {
    const dir = dataDir();
    const killed = await serviceWithSandbox(dir);
    const sandboxDir = join(dir, "sandboxes", killed.spec.sandboxId);
    const wsDir = join(dir, "workspaces", `${killed.spec.tenantId}_${killed.spec.sessionId}`);
    try {
      killed.child.kill("SIGKILL");
      await until("the killed service's sandbox ends", () =>
        killed.cgroupDirs.every((d) => !exists(d) || fs.readFileSync(join(d, "cgroup.procs"), "utf8") === ""),
      );
      const next = driverOn(dir);
      try {
        // A live sandbox of another session, recovered or created by this driver: never marked.
        const live = contractSpec("local");
        live.workspace.size = "64Mi";
        await next.create(live);
        assert.equal((await next.waitSettled(live.sandboxId, AbortSignal.timeout(30_000))).phase, "ready");
        // The killed one is not recovered (its record ended while no service watched): nothing marks it but reconcile.
        assert.equal(exists(join(sandboxDir, "annotations.json")), false);
        assert.equal(exists(join(wsDir, "annotations.json")), false);
        const marked = await next.reconcile();
        assert.deepEqual(marked.sort(), [sandboxDir, wsDir].sort());
        const marks = JSON.parse(fs.readFileSync(join(sandboxDir, "annotations.json"), "utf8")) as Record<
          string,
          string
        >;
        assert.ok(Date.parse(marks[DELETE_AFTER_KEY] ?? "") > Date.now() + 23 * 3600_000, JSON.stringify(marks));
        assert.ok(exists(join(wsDir, "annotations.json")));
        assert.equal(
          exists(join(dir, "sandboxes", live.sandboxId, "annotations.json")),
          false,
          "the live sandbox is not marked",
        );
        assert.equal(
          exists(join(dir, "workspaces", `${live.tenantId}_${live.sessionId}`, "annotations.json")),
          false,
          "nor its workspace",
        );
        assert.deepEqual(await next.reconcile(), [], "a second pass marks nothing");
        // The session can still come back within the grace: its workspace, files and all.
        const again = { ...contractSpec("local"), tenantId: killed.spec.tenantId, sessionId: killed.spec.sessionId };
        await next.create(again);
        assert.equal((await next.waitSettled(again.sandboxId, AbortSignal.timeout(30_000))).phase, "ready");
        assert.equal(
          (await collectExec(next, again.sandboxId, { command: "/bin/cat", args: ["kept.txt"] })).stdout,
          "kept\n",
        );
      } finally {
        await next.close();
      }
    } finally {
      if (killed.child.exitCode === null) killed.child.kill("SIGKILL");
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a sandbox that fails (max_runtime) loses its cgroup at once and gets a delete-after; GC collects it after the grace", async () => {
    const dir = dataDir();
    const driver = driverOn(dir);
    try {
      // Long enough to be seen READY on a loaded machine.
      const spec = contractSpec("local", { maxRuntimeMs: 4000 });
      spec.workspace.size = "64Mi";
      await driver.create(spec);
      assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(30_000))).phase, "ready");
      const cgroupDirs = driver
        .cgroupOf(spec.sandboxId)
        .procsFiles()
        .map((f) => dirname(f));
      assert.equal((await collectExec(driver, spec.sandboxId, { command: "/bin/true" })).completed.exitCode, 0);
      assert.ok(cgroupDirs.every(exists));
      for (let i = 0; i < 200 && (await driver.observe(spec.sandboxId)).phase === "ready"; i++) await sleep(100);
      const o = await driver.observe(spec.sandboxId);
      assert.equal(o.reason, "deadline", JSON.stringify(o));
      await until("its cgroups are removed", () => cgroupDirs.every((d) => !exists(d)));
      assert.deepEqual(await driver.collectGarbage(new Date()), []);
      assert.deepEqual(
        (await driver.collectGarbage(new Date(Date.now() + DAY_AND_A_BIT))).sort(),
        [spec.sandboxId, `session:${spec.tenantId}_${spec.sessionId}`].sort(),
      );
    } finally {
      await driver.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("closing a driver whose sandboxes end with it removes their cgroups, its own and its socket directory", async () => {
    const dir = dataDir();
    const driver = driverOn(dir, { cgroupPrefix: `${PREFIX}-close` });
    const specs = [contractSpec("local"), contractSpec("local")];
    const cgroupDirs: string[] = [];
    for (const spec of specs) {
      spec.workspace.size = "64Mi";
      await driver.create(spec);
      assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(30_000))).phase, "ready");
      await collectExec(driver, spec.sandboxId, { command: "/bin/true" });
      cgroupDirs.push(
        ...driver
          .cgroupOf(spec.sandboxId)
          .procsFiles()
          .map((f) => dirname(f)),
      );
    }
    const roots = [...new Set(cgroupDirs.map((d) => dirname(d)))];
    const socketDir = (driver as unknown as { helper: { socketDir: string } }).helper.socketDir;
    assert.ok(exists(socketDir));
    await driver.close();
    try {
      assert.deepEqual(cgroupDirs.filter(exists), []);
      assert.deepEqual(roots.filter(exists), []);
      assert.equal(exists(socketDir), false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the socket directory sweep removes only our directories whose owner is dead", async () => {
    const base = fs.mkdtempSync(join(tmpdir(), "compute-sockdirs-"));
    const victim = fs.mkdtempSync(join(tmpdir(), "compute-sockdirs-victim-"));
    fs.writeFileSync(join(victim, "keep"), "x");
    const old = new Date(Date.now() - 3600_000);
    const mk = (name: string, aged = false) => {
      const p = join(base, name);
      fs.mkdirSync(p, { mode: 0o700 });
      fs.writeFileSync(join(p, "streams.sock"), "");
      if (aged) fs.utimesSync(p, old, old);
      return p;
    };
    const alive = mk(`platform-compute-exec-${process.pid}-${processStartTime(process.pid)}-aaaaaa`);
    const deadPid = mk("platform-compute-exec-4194302-12345-bbbbbb");
    const reusedPid = mk(`platform-compute-exec-${process.pid}-1-cccccc`);
    const legacyYoung = mk("platform-compute-exec-dddddd");
    const legacyOld = mk("platform-compute-exec-eeeeee", true);
    const legacyListening = join(base, "platform-compute-exec-ffffff");
    fs.mkdirSync(legacyListening, { mode: 0o700 });
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(join(legacyListening, "streams.sock"), () => r()));
    fs.utimesSync(legacyListening, old, old);
    const link = join(base, "platform-compute-exec-4194301-1-gggggg");
    fs.symlinkSync(victim, link);
    const other = mk("something-else-4194302-1-x", true);
    try {
      const removed = removeStaleSocketDirs(base).sort();
      assert.deepEqual(removed, [deadPid, reusedPid, legacyOld].sort());
      for (const kept of [alive, legacyYoung, legacyListening, link, other]) assert.ok(exists(kept), kept);
      assert.ok(exists(join(victim, "keep")));
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      fs.rmSync(base, { recursive: true, force: true });
      fs.rmSync(victim, { recursive: true, force: true });
    }
  });
});
