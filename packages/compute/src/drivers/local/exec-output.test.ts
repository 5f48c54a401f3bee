// How the local driver starts commands and carries their output: bounded
// buffering with backpressure to the command, the exec helper's placement
// and privileges, and no sandbox at all when the helper cannot be built.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, PlatformError } from "@platform/errors";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { Cgroup } from "./cgroups.ts";
import { LocalDriver } from "./local-driver.ts";
import { MAX_EVENT_BYTES, OutputQueue } from "./output-queue.ts";
import { workspaceImageOf } from "./session-workspace.ts";
import { WorkspaceImage } from "./workspace-image.ts";

const MiB = 1024 * 1024;

describe("OutputQueue", () => {
  test("pauses both streams at the limit, resumes as the reader catches up, merges chunks up to the event size", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const q = new OutputQueue({ stdout, stderr }, 256 * 1024);
    const chunk = Buffer.alloc(64 * 1024, 1);
    for (let i = 0; i < 8; i++) stdout.write(chunk);
    await sleep(10);
    assert.ok(q.bufferedBytes >= 256 * 1024 && q.bufferedBytes <= 320 * 1024, `buffered ${q.bufferedBytes}`);
    assert.ok(stdout.isPaused() && stderr.isPaused(), "paused at the limit");
    stderr.end("e");
    stdout.end();
    let out = 0;
    let err = "";
    let events = 0;
    for await (const e of q.events()) {
      events++;
      assert.ok(e.data.length <= MAX_EVENT_BYTES);
      if (e.type === "stdout") out += e.data.length;
      else err += Buffer.from(e.data).toString();
    }
    assert.equal(out, 8 * chunk.length, "nothing lost across pauses");
    assert.equal(err, "e");
    assert.ok(events < 9, `chunks merged into ${events} events`);
  });

  test("streams that ended before it was made still end it", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    stdout.destroy();
    stderr.destroy();
    await sleep(1);
    const events = [];
    for await (const e of new OutputQueue({ stdout, stderr }).events()) events.push(e);
    assert.equal(events.length, 0);
  });
});

describe("OutputQueue on sockets (the exec helper's connections)", () => {
  test("reads in place: every byte in order, no join copies, the limit still pauses the command", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "compute-oq-"));
    const accepted: net.Socket[] = [];
    const server = net.createServer((s) => {
      // As the helper's server hands them over: paused, with what came with the tag put back.
      s.pause();
      s.unshift(Buffer.from(accepted.length === 0 ? "so" : "se"));
      accepted.push(s);
    });
    await new Promise<void>((r) => server.listen(join(dir, "s.sock"), r));
    const out = net.connect(join(dir, "s.sock"));
    while (accepted.length < 1) await sleep(2);
    const err = net.connect(join(dir, "s.sock"));
    while (accepted.length < 2) await sleep(2);
    const q = new OutputQueue({ stdout: accepted[0] as net.Socket, stderr: accepted[1] as net.Socket }, 256 * 1024);
    // 16 MiB of stdout in 40 KiB writes, each byte its offset's low byte; then one line of stderr.
    const total = 16 * MiB;
    const write = async () => {
      for (let at = 0; at < total; at += 40 * 1024) {
        const chunk = Buffer.alloc(Math.min(40 * 1024, total - at));
        for (let i = 0; i < chunk.length; i++) chunk[i] = (at + i) & 0xff;
        if (!out.write(chunk)) await new Promise((r) => out.once("drain", r));
      }
      out.end();
      err.end("done\n");
    };
    const writing = write();
    await sleep(50);
    assert.ok(q.bufferedBytes <= 256 * 1024 + MAX_EVENT_BYTES, `buffered ${q.bufferedBytes} while nobody read`);
    let joins = 0;
    const { concat } = Buffer;
    Buffer.concat = ((list: readonly Uint8Array[], length?: number) => {
      joins++;
      return concat(list, length);
    }) as typeof Buffer.concat;
    let stdout = 0;
    let stderr = "";
    let bad = -1;
    try {
      for await (const e of q.events()) {
        assert.ok(e.data.length <= MAX_EVENT_BYTES);
        if (e.type === "stderr") {
          stderr += Buffer.from(e.data).toString();
          continue;
        }
        // The first two bytes are the put-back "so".
        const skip = stdout === 0 ? 2 : 0;
        for (let i = skip; i < e.data.length && bad < 0; i++)
          if (e.data[i] !== (stdout - 2 + i) % 256) bad = stdout - 2 + i;
        stdout += e.data.length;
      }
    } finally {
      Buffer.concat = concat;
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await writing;
    assert.equal(bad, -1, "every byte in order");
    assert.equal(stdout, total + 2);
    assert.equal(stderr, "sedone\n");
    // Node reads a socket 64 KiB at a time; joining them into events copied every byte.
    assert.equal(joins, 0, "events are views of what was read, not joins");
  });
});

describe("local driver exec path", () => {
  let dataDir: string;
  let driver: LocalDriver;
  let id: string;
  let image: string;

  before(async () => {
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-exec-"));
    fs.chmodSync(dataDir, 0o711);
    const common = { dataDir, killGraceMs: 300, dieWithService: true };
    driver = new LocalDriver({ ...common, cgroupPrefix: `platform-compute-exec-${process.pid}` });
    const spec = contractSpec("local");
    await driver.create(spec);
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
    id = spec.sandboxId;
    image = workspaceImageOf(dataDir, spec.tenantId, spec.sessionId);
  });

  after(async () => {
    await driver.destroy(id).catch(() => {});
    await driver.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test("a reader that stops makes the command wait instead of the service buffering its output", async () => {
    const marker = `written-${randomUUID()}`;
    const hostMarker = join(new WorkspaceImage(image).mountPoint(), marker);
    const total = 32 * MiB;
    const events = driver
      .exec(id, {
        command: "/bin/sh",
        args: ["-c", `head -c ${total} /dev/zero; touch ${marker}`],
        env: {},
        workingDir: "/workspace",
      })
      [Symbol.asyncIterator]();
    const first = await events.next();
    assert.equal(first.value?.type, "stdout");
    let received = first.value?.type === "stdout" ? first.value.data.length : 0;
    // Unbuffered, 32 MiB of zeros are written in well under this.
    for (let i = 0; i < 20; i++) {
      await sleep(50);
      assert.equal(fs.existsSync(hostMarker), false, "the command finished writing although nobody read its output");
    }
    let completed: { exitCode: number } | undefined;
    for (let e = await events.next(); !e.done; e = await events.next()) {
      if (e.value.type === "stdout") received += e.value.data.length;
      if (e.value.type === "completed") completed = e.value;
    }
    assert.equal(received, total);
    assert.equal(completed?.exitCode, 0);
    assert.equal(fs.existsSync(hostMarker), true);
  });

  test("a command runs in its exec cgroup, as the sandbox uid, with no capabilities, groups or new privileges", async () => {
    const r = await collectExec(driver, id, {
      command: "/bin/sh",
      args: [
        "-c",
        "grep -E '^[0-9]+:(memory|pids):' /proc/self/cgroup; id -u; id -G; grep -E '^(CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs|Groups):' /proc/self/status",
      ],
    });
    assert.equal(r.completed.exitCode, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    const cgroups = lines.filter((l) => /^\d+:(memory|pids):/.test(l));
    assert.equal(cgroups.length, 2, r.stdout);
    for (const l of cgroups) assert.match(l, /:\/exec-\d+$/, "joined before anything of the command ran");
    const uid = lines[2];
    assert.notEqual(uid, "0");
    assert.equal(lines[3], uid, "only the sandbox's own group");
    for (const cap of ["CapInh", "CapPrm", "CapEff", "CapAmb"]) assert.match(r.stdout, new RegExp(`${cap}:\\s+0{16}`));
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /Groups:\s*\n/);
  });

  test("the next exec runs in the child placed ahead in its cgroup; one that is gone is replaced by a usual start", async () => {
    // Host pid of the process waiting in the sandbox's spare exec cgroup (made once an exec is done).
    const placed = async (): Promise<number> => {
      const dir = driver.cgroupOf(id).dirs.pids ?? driver.cgroupOf(id).dirs.unified ?? "";
      for (let i = 0; i < 200; i++) {
        for (const sub of fs.readdirSync(dir).filter((n) => n.startsWith("exec-"))) {
          const pids = fs.readFileSync(join(dir, sub, "cgroup.procs"), "utf8").trim();
          const pid = Number(pids.split("\n")[0]);
          // In the sandbox as its user: it says ready right after.
          if (pids && /^Uid:\s+[1-9]/m.test(fs.readFileSync(`/proc/${pid}/status`, "utf8"))) {
            await sleep(50);
            return pid;
          }
        }
        await sleep(10);
      }
      throw new Error("no child was placed");
    };
    await collectExec(driver, id, { command: "/bin/true" });
    const waiting = await placed();
    assert.match(fs.readFileSync(`/proc/${waiting}/cmdline`, "utf8"), /exec-helper/);
    let command = "";
    for await (const e of driver.exec(id, {
      command: "/bin/sh",
      args: ["-c", "echo started; sleep 0.3"],
      env: {},
      workingDir: "/workspace",
    })) {
      if (e.type === "stdout" && !command) command = fs.readFileSync(`/proc/${waiting}/cmdline`, "utf8");
    }
    assert.match(command, /^\/bin\/sh\0-c\0echo started/, "the command is that process");
    process.kill(await placed(), "SIGKILL");
    await sleep(50);
    const after = await collectExec(driver, id, { command: "/bin/echo", args: ["still works"] });
    assert.equal(after.stdout, "still works\n");
    assert.equal(after.completed.exitCode, 0);
  });

  test("an exec's end waits for the kill begun at its command's exit instead of reading its cgroup again, and removes the cgroup after its completed event", async () => {
    // The ends of the execs before (their cgroups' removal) are out of the way.
    await sleep(100);
    const isExec = (c: Cgroup) => /\/exec-\d+\/cgroup\.procs$/.test(c.procsFiles()[0] ?? "");
    const { isEmpty, remove } = Cgroup.prototype;
    let emptyChecks = 0;
    let removes = 0;
    Cgroup.prototype.isEmpty = function (this: Cgroup) {
      if (isExec(this)) emptyChecks++;
      return isEmpty.call(this);
    };
    Cgroup.prototype.remove = function (this: Cgroup) {
      if (isExec(this)) removes++;
      return remove.call(this);
    };
    try {
      let removesAtCompleted = -1;
      for await (const e of driver.exec(id, { command: "/bin/true", args: [], env: {}, workingDir: "/workspace" })) {
        if (e.type === "completed") {
          assert.equal(e.exitCode, 0);
          removesAtCompleted = removes;
        }
      }
      assert.equal(emptyChecks, 1, "the exec's cgroup was read once for leftovers");
      assert.equal(removesAtCompleted, 0, "not removed on the completed event's way");
      await new Promise((r) => setImmediate(r));
      assert.equal(removes, 1, "removed right after");
    } finally {
      Cgroup.prototype.isEmpty = isEmpty;
      Cgroup.prototype.remove = remove;
    }
  });

  test("without a C compiler or libseccomp no sandbox starts (there is no unfiltered fallback), and the error says what to install", async () => {
    // A fresh helper directory (none built there yet) and a compiler that fails.
    const saved = { TMPDIR: process.env.TMPDIR, CC: process.env.CC };
    const tmp = fs.mkdtempSync(join(tmpdir(), "compute-nocc-"));
    process.env.TMPDIR = tmp;
    process.env.CC = "/bin/false";
    let broken: LocalDriver;
    try {
      broken = new LocalDriver({
        dataDir,
        dieWithService: true,
        cgroupPrefix: `platform-compute-exec-nocc-${process.pid}`,
      });
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    try {
      await assert.rejects(broken.create(contractSpec("local")), (err: unknown) => {
        assert.ok(err instanceof PlatformError);
        assert.equal(err.code, Code.Internal);
        assert.match(err.message, /libseccomp-dev/);
        return true;
      });
    } finally {
      await broken.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
