// test-timeout: 120000
// An exec that comes while the child placed ahead for it is still on its way
// into the sandbox (joining its cgroups waits for an RCU grace period) waits
// for that child instead of killing it and starting another, which would
// wait for the same grace period and more; the helper serves other requests
// meanwhile, a child that never gets in holds its exec back only for a
// bounded time, and sandbox processes cannot reach a placed child's channel.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import type { Cgroup } from "./cgroups.ts";
import { ExecHelper, type Launched, type Placement } from "./exec-helper.ts";
import { LocalDriver } from "./local-driver.ts";
import { processStartTime } from "./sandbox-layout.ts";

/** PARK_MS of exec-helper.c: how long an exec waits for a placed child that is not in yet. */
const PARK_MS = 200;

function helperPid(helper: ExecHelper): number {
  const pid = (helper as unknown as { child?: { pid?: number } }).child?.pid;
  assert.ok(pid, "the helper runs");
  return pid;
}

/** Host pids of ppid's children. */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === ppid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The helper's child that was not there before (the one place() forked). */
async function newChild(helper: ExecHelper, before: number[]): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const fresh = childrenOf(helperPid(helper)).filter((p) => !before.includes(p));
    if (fresh.length === 1) return fresh[0] as number;
    await sleep(10);
  }
  throw new Error("the helper forked no placed child");
}

function cmdline(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

function statusField(pid: number, key: string): string {
  const m = new RegExp(`^${key}:\\s*(.*)$`, "m").exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m?.[1]?.trim() ?? "";
}

/** Whether pid is gone (or a zombie the helper has not reaped yet). */
function gone(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    assert.ok(Date.now() < deadline, `timed out waiting: ${what}`);
    await sleep(5);
  }
}

async function collect(launched: Launched): Promise<{ stdout: string; stderr: string; code: number | null }> {
  let stdout = "";
  let stderr = "";
  launched.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  launched.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  launched.stdout.resume();
  launched.stderr.resume();
  const ended = (s: NodeJS.ReadableStream) => new Promise((r) => s.once("close", r));
  const [status] = await Promise.all([launched.exit, ended(launched.stdout), ended(launched.stderr)]);
  return { stdout, stderr, code: status.code };
}

describe("exec helper: an exec waits for its placed child on its way in", () => {
  let dataDir: string;
  let tmp: string;
  let binDir: string;
  let driver: LocalDriver;
  let helper: ExecHelper;
  let id: string;
  let initPid: number;
  let uid: number;
  let seq = 0;

  before(async () => {
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-parked-"));
    fs.chmodSync(dataDir, 0o711);
    tmp = fs.mkdtempSync(join(tmpdir(), "compute-parked-gate-"));
    driver = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      dieWithService: true,
      warmSandboxes: 0,
      cgroupPrefix: `platform-compute-parked-${process.pid}`,
    });
    const spec = contractSpec("local");
    await driver.create(spec);
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
    id = spec.sandboxId;
    initPid = (JSON.parse(fs.readFileSync(join(dataDir, "sandboxes", id, "state.json"), "utf8")) as { initPid: number })
      .initPid;
    uid = Number(statusField(initPid, "Uid").split(/\s+/)[0]);
    assert.ok(uid > 0);
    // A helper of its own (the driver's keeps serving the driver), built into a private directory.
    binDir = fs.mkdtempSync(join(tmpdir(), "compute-parked-bin-"));
    helper = new ExecHelper(undefined, binDir);
  });

  after(async () => {
    await helper?.close();
    await driver?.destroy(id).catch(() => {});
    await driver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(binDir, { recursive: true, force: true });
  });

  /**
   * A placement in a new exec cgroup of the sandbox whose first "cgroup.procs
   * file" is a FIFO: the placed child blocks opening it (as its cgroup move
   * would wait) until the test opens its other end.
   */
  async function gatedPlacement(): Promise<{ placement: Placement; cgroup: Cgroup; gate: string }> {
    const n = ++seq;
    const gate = join(tmp, `gate-${n}`);
    execFileSync("mkfifo", ["-m", "0600", gate]);
    const cgroup = driver.cgroupOf(id).child(`exec-parked-${n}`);
    await cgroup.createAsync();
    const placement = {
      initPid,
      initStartTime: processStartTime(initPid),
      uid,
      cgroupProcs: [gate, ...cgroup.procsFiles()],
    };
    return { placement, cgroup, gate };
  }

  test("the command runs in that very child once it is in: its cgroup, namespaces, uid and filter, with its stdio, cwd, env and exit code", async () => {
    const { placement, cgroup, gate } = await gatedPlacement();
    await (helper as unknown as { ensureRunning(): Promise<unknown> }).ensureRunning();
    const before = childrenOf(helperPid(helper));
    const placed = await helper.place(placement);
    const child = await newChild(helper, before);
    const launched = await helper.launch(
      {
        ...placement,
        workingDir: "/tmp",
        command: "/bin/sh",
        args: ["-c", 'echo "out $(pwd) $PARKED_ENV"; echo err >&2; sleep 0.3; exit 7'],
        env: { PARKED_ENV: "kept" },
      },
      placed,
    );
    const result = collect(launched);
    let reader: number | undefined;
    try {
      // The streams are connected: the helper has seen the exec. The child is still at the gate, alive, waiting.
      await sleep(50);
      assert.equal(gone(child), false, "the placed child was not killed for being late");
      assert.match(cmdline(child), /exec-helper/, "nothing runs before the child is in");
      // Let it in (O_NONBLOCK: the open does not wait for the writer; it wakes it).
      reader = fs.openSync(gate, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
      await until("the command runs in the placed child", () => cmdline(child).startsWith("/bin/sh\0-c\0"));
      assert.ok(cgroup.pids().includes(child), "in the exec's cgroup");
      for (const ns of ["mnt", "pid", "net", "user", "uts", "ipc"]) {
        assert.equal(
          fs.readlinkSync(`/proc/${child}/ns/${ns}`),
          fs.readlinkSync(`/proc/${initPid}/ns/${ns}`),
          `in the sandbox's ${ns} namespace`,
        );
      }
      assert.equal(statusField(child, "Uid").split(/\s+/)[0], String(uid));
      assert.equal(statusField(child, "NoNewPrivs"), "1");
      assert.equal(statusField(child, "Seccomp"), "2", "under the sandbox's filter");
      assert.equal(statusField(child, "CapEff"), "0000000000000000");
      const { stdout, stderr, code } = await result;
      assert.equal(stdout, "out /tmp kept\n");
      assert.equal(stderr, "err\n");
      assert.equal(code, 7);
    } finally {
      // Whatever waits at the gate goes on (and ends with the cgroup), so nothing is left blocked.
      reader ??= fs.openSync(gate, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
      await result.catch(() => {});
      fs.closeSync(reader);
      await cgroup.killAll(1000);
      await cgroup.remove();
    }
  });

  test("meanwhile the helper serves other execs; a child that never gets in holds its exec back only for a while, which then starts the usual way", async () => {
    const { placement, cgroup, gate } = await gatedPlacement();
    const before = childrenOf(helperPid(helper));
    const placed = await helper.place(placement);
    const child = await newChild(helper, before);
    // Stopped at the gate: it will not say ready until it is killed.
    process.kill(child, "SIGSTOP");
    const reader = fs.openSync(gate, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    try {
      const started = Date.now();
      const held = collect(
        await helper.launch(
          { ...placement, workingDir: "/", command: "/bin/sh", args: ["-c", "echo late; id -u"], env: {} },
          placed,
        ),
      );
      // Another exec (a plain one, no placed child) while the first waits: served at once.
      const other = driver.cgroupOf(id).child(`exec-parked-other-${++seq}`);
      await other.createAsync();
      try {
        const quick = await collect(
          await helper.launch({
            initPid,
            initStartTime: processStartTime(initPid),
            uid,
            cgroupProcs: other.procsFiles(),
            workingDir: "/",
            command: "/bin/echo",
            args: ["meanwhile"],
            env: {},
          }),
        );
        assert.equal(quick.stdout, "meanwhile\n");
        assert.equal(quick.code, 0);
      } finally {
        await other.remove();
      }
      const { stdout, code } = await held;
      const waited = Date.now() - started;
      assert.equal(code, 0);
      assert.equal(stdout, `late\n${uid}\n`);
      assert.ok(waited >= PARK_MS - 20, `started after the deadline (${waited} ms)`);
      await until("the stopped child was killed", () => gone(child));
    } finally {
      fs.closeSync(reader);
      await cgroup.killAll(1000);
      await cgroup.remove();
    }
  });

  test("a placed child's output connections are made with it, held by the helper: its exec connects none, and a child on its way in holds none of another's", async () => {
    await (helper as unknown as { ensureRunning(): Promise<unknown> }).ensureRunning();
    const server = (helper as unknown as { server: import("node:net").Server }).server;
    let connections = 0;
    const count = () => connections++;
    server.on("connection", count);
    const pipes = () => process.getActiveResourcesInfo().filter((r) => r === "PipeWrap").length;
    const pipesBefore = pipes();
    const cgroup = driver.cgroupOf(id).child(`exec-parked-streams-${++seq}`);
    await cgroup.createAsync();
    const gated = await gatedPlacement();
    let reader: number | undefined;
    try {
      const placement = { initPid, initStartTime: processStartTime(initPid), uid, cgroupProcs: cgroup.procsFiles() };
      const before = childrenOf(helperPid(helper));
      const placed = await helper.place(placement);
      const child = await newChild(helper, before);
      await until("the placed child is in", () => statusField(child, "Uid").split(/\s+/)[0] === String(uid));
      // Another child, held on its way in (at the gate, before it closes what it inherited from the helper).
      await helper.place(gated.placement);
      const held = await newChild(helper, [...before, child]);
      await until("both placed children's stdout and stderr connections are made", () => connections === 4);
      // Waiting for their exec, they do not keep the service alive.
      assert.equal(pipes(), pipesBefore, "the connections made ahead are not referenced");
      const launched = await helper.launch(
        { ...placement, workingDir: "/", command: "/bin/echo", args: ["ahead"], env: {} },
        placed,
      );
      // Its end is seen while the other child still waits at the gate: nothing else holds its output open.
      const result = await Promise.race([collect(launched), sleep(3000).then(() => "held open")]);
      assert.deepEqual(result, { stdout: "ahead\n", stderr: "", code: 0 });
      assert.equal(connections, 4, "the exec made no connection of its own");
      assert.equal(gone(held), false, "the other child is still on its way in");
    } finally {
      server.off("connection", count);
      reader = fs.openSync(gated.gate, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
      await sleep(50);
      fs.closeSync(reader);
      for (const c of [cgroup, gated.cgroup]) {
        await c.killAll(1000);
        await c.remove();
      }
    }
  });

  test("the next exec's slot is made as soon as an exec is done, not some time later", async () => {
    const slots = () =>
      (driver as unknown as { sandboxes: Map<string, { slots: { spare?: Promise<unknown> } }> }).sandboxes.get(id)
        ?.slots;
    await collectExec(driver, id, { command: "/bin/true" });
    // The exec took the spare; its completed event is out: the next one is under way by the next turn of the loop.
    await new Promise((r) => setImmediate(r));
    assert.ok(slots()?.spare, "a spare slot is being made");
    await slots()?.spare;
  });

  test("a sandbox process cannot reach a placed child's channel (its descriptors, its memory)", async () => {
    // A child placed in a cgroup of its own and in the sandbox as its uid, waiting on its socket (fd 3) for a command.
    const cgroup = driver.cgroupOf(id).child(`exec-parked-probe-${++seq}`);
    await cgroup.createAsync();
    const before = childrenOf(helperPid(helper));
    await helper.place({ initPid, initStartTime: processStartTime(initPid), uid, cgroupProcs: cgroup.procsFiles() });
    const waiting = await newChild(helper, before);
    await until("the placed child is in", () => statusField(waiting, "Uid").split(/\s+/)[0] === String(uid));
    const nspid = statusField(waiting, "NSpid").split(/\s+/).at(-1);
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: [
        "-c",
        `ls /proc/${nspid}/fd 2>&1 && echo LISTED; cat /proc/${nspid}/fd/3 </dev/null 2>&1 && echo OPENED; head -c1 /proc/${nspid}/mem 2>&1 && echo READ; grep -c . /proc/${nspid}/environ 2>&1 && echo ENV; echo done`,
      ],
    });
    assert.equal(r.completed.exitCode, 0, r.stderr);
    assert.match(r.stdout, /done\n$/);
    for (const word of ["LISTED", "OPENED", "READ", "ENV"]) assert.doesNotMatch(r.stdout, new RegExp(word), r.stdout);
    assert.match(r.stdout, /Permission denied/);
    assert.equal(gone(waiting), false, "still waiting for a command");
    process.kill(waiting, "SIGKILL");
    await until("the probe child is gone", () => gone(waiting));
    await cgroup.remove();
  });
});
