// test-timeout: 240000
// The launch chain's root part (launch-helper.c, or the shell chain where it
// cannot be built): a private mount namespace with the sandbox's bind mounts
// and the workspaces' tree detached, then the sandbox uid with no groups, no
// capabilities, no_new_privs and the parent-death signal. Checked on the
// helper alone (what its program sees) and on a real sandbox's bwrap through
// both chains, fresh and through the spare launcher of a released resume.
// Real local driver (root, cgroups, loop devices).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { after, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { removeTestCgroups } from "../../testing/test-cgroups.ts";
import { until } from "../../testing/until.ts";
import { hostEtcBinds } from "./bwrap.ts";
import { buildLaunchHelper } from "./launch.ts";
import { LocalDriver } from "./local-driver.ts";
import { MOUNTS_ROOT } from "./workspace-image.ts";

const PREFIX = `platform-compute-launch-helper-${process.pid}`;
const STAGE = "/run/platform-compute-stage";
const UID = 2_000_000_000 + (process.pid % 100_000);
/** What the chain's best-effort `oom_score_adj` -999 leaves on this machine (some refuse the write: then 0). */
const OOM_SCORE_ADJ = execFileSync(
  "/bin/sh",
  ["-c", "echo -999 > /proc/self/oom_score_adj 2>/dev/null; cat /proc/self/oom_score_adj"],
  { encoding: "utf8" },
).trim();

/** The fields of /proc/<pid>/status this file checks. */
function privileges(status: string): Record<string, string> {
  const keep = ["Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs"];
  const out: Record<string, string> = {};
  for (const line of status.split("\n")) {
    const [key, value] = line.split(":\t");
    if (key && keep.includes(key)) out[key] = (value ?? "").trim().replace(/\s+/g, " ");
  }
  return out;
}

const dropped = (uid: number) => ({
  Uid: `${uid} ${uid} ${uid} ${uid}`,
  Gid: `${uid} ${uid} ${uid} ${uid}`,
  Groups: "",
  CapInh: "0000000000000000",
  CapPrm: "0000000000000000",
  CapEff: "0000000000000000",
  CapAmb: "0000000000000000",
  NoNewPrivs: "1",
});

/** /proc/<pid>/mountinfo as [mount point, per-mount options, optional fields]. */
function mounts(mountinfo: string): { point: string; options: string; optional: string }[] {
  return mountinfo
    .trim()
    .split("\n")
    .map((line) => {
      const fields = line.split(" ");
      const sep = fields.indexOf("-");
      return { point: fields[4] ?? "", options: fields[5] ?? "", optional: fields.slice(6, sep).join(" ") };
    });
}

function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(join(tmpdir(), prefix));
  fs.chmodSync(dir, 0o755);
  return dir;
}

/** Runs the helper with fds 0-2 and a join pipe at 6 (and a request pipe at 7), writing join and request there. */
async function runHelper(
  helper: string,
  args: string[],
  input: { join?: string; request?: string } = {},
  /** A parent with something to drop: supplementary groups, an inheritable and an ambient capability. */
  privileged = false,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const wrapper = privileged
    ? ["--groups=4,27", "--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service", "--", helper]
    : [];
  const child = spawn(privileged ? "/usr/bin/setpriv" : helper, [...wrapper, ...args], {
    env: { PATH: "/usr/bin:/bin", MARK: "from-spawn" },
    stdio: ["ignore", "pipe", "pipe", "ignore", "ignore", "ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  for (const [fd, text] of [
    [6, input.join],
    [7, input.request],
  ] as const) {
    const pipe = child.stdio.at(fd) as Writable;
    pipe.on("error", () => {});
    if (text === undefined) pipe.end();
    else pipe.end(text);
  }
  const code = await new Promise<number | null>((r) => child.once("close", (c) => r(c)));
  return { code, stdout, stderr };
}

describe("the launch helper alone", () => {
  let helper = "";
  const dirs: string[] = [];
  let detach = "";
  let stage = "";
  let sandboxDir = "";
  let workspace = "";

  const fields = (program: string[]) => [
    String(UID),
    String(UID),
    detach,
    "2",
    sandboxDir,
    stage,
    workspace,
    join(stage, "workspace"),
    "0",
    ...program,
  ];
  const report = [
    "/bin/sh",
    "sh",
    "-c",
    `cat /proc/self/status; echo ---; cat /proc/self/mountinfo; echo ---; cat /proc/self/oom_score_adj; echo ---; cat ${"$0"}/marker ${"$0"}/workspace/marker; echo ---; readlink /proc/self/ns/mnt; echo ---; tr '\\0' '\\n' < /proc/$$/environ`,
  ];

  test("setup: built, and a mount to detach", async () => {
    helper = await buildLaunchHelper();
    for (const name of ["detach", "stage", "sandbox", "workspace"]) dirs.push(tempDir(`launch-helper-${name}-`));
    [detach, stage, sandboxDir, workspace] = dirs as [string, string, string, string];
    fs.mkdirSync(join(sandboxDir, "workspace"));
    fs.writeFileSync(join(sandboxDir, "marker"), "sandbox dir\n", { mode: 0o644 });
    fs.writeFileSync(join(workspace, "marker"), "workspace\n", { mode: 0o644 });
    execFileSync("mount", ["--bind", detach, detach]);
  });

  after(() => {
    if (detach) execFileSync("umount", ["-l", detach]);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  const checkReport = (stdout: string, env: string[]) => {
    const [status, mountinfo, oom, markers, ns, printedEnv] = stdout.split("---\n");
    assert.deepEqual(privileges(status ?? ""), dropped(UID), "the program runs as the sandbox uid, nothing else");
    assert.equal(oom?.trim(), OOM_SCORE_ADJ);
    assert.equal(markers, "sandbox dir\nworkspace\n", "the sandbox directory and the workspace bound in order");
    assert.notEqual(ns?.trim(), fs.readlinkSync("/proc/self/ns/mnt"), "its own mount namespace");
    const seen = mounts(mountinfo ?? "");
    assert.ok(
      seen.some((m) => m.point === stage),
      "the stage is a mount point",
    );
    assert.ok(seen.some((m) => m.point === join(stage, "workspace")));
    assert.deepEqual(
      seen.filter((m) => m.point === detach || m.point.startsWith(`${detach}/`)),
      [],
      "the detached tree is gone from its namespace",
    );
    assert.deepEqual(
      seen.filter((m) => /shared:|master:/.test(m.optional)),
      [],
      "every mount of its namespace is private",
    );
    assert.deepEqual((printedEnv ?? "").trim().split("\n").sort(), env.sort(), "exactly the environment it was given");
    const host = mounts(fs.readFileSync("/proc/self/mountinfo", "utf8"));
    assert.ok(
      host.some((m) => m.point === detach),
      "the host keeps its mount",
    );
    assert.ok(!host.some((m) => m.point === stage), "nothing of the namespace reaches the host");
  };

  test("mounts, detaches, waits for joined, drops everything, then runs the program with its argv and environment", async () => {
    const r = await runHelper(
      helper,
      ["--join-fd=6", "--", ...fields([...report.slice(0, 4), stage])],
      { join: "joined\n" },
      true,
    );
    assert.equal(r.code, 0, r.stderr);
    checkReport(r.stdout, ["PATH=/usr/bin:/bin", "MARK=from-spawn"]);
  });

  test("read-only binds: a placeholder of the source's kind, bound read-only, nosuid and nodev; a missing source skipped", async () => {
    const host = tempDir("launch-helper-etc-");
    dirs.push(host);
    fs.writeFileSync(join(host, "file"), "host file\n", { mode: 0o644 });
    fs.mkdirSync(join(host, "dir"));
    fs.writeFileSync(join(host, "dir", "inside"), "");
    fs.writeFileSync(join(host, "was-a-dir"), "now a file\n", { mode: 0o644 });
    const etc = join(sandboxDir, "etc");
    fs.mkdirSync(join(etc, "was-a-dir"), { recursive: true });
    const ro = ["file", "dir", "missing", "was-a-dir"].flatMap((name) => [join(host, name), join(stage, "etc", name)]);
    const program = [
      "/bin/sh",
      "sh",
      "-c",
      `cat ${stage}/etc/file ${stage}/etc/was-a-dir; ls ${stage}/etc/dir; ls ${stage}/etc | tr '\\n' ' '; echo; grep -F " ${stage}/etc/" /proc/self/mountinfo | cut -d" " -f5,6`,
    ];
    const withRo = fields(program);
    withRo.splice(withRo.indexOf("0"), 1, "4", ...ro);
    const r = await runHelper(helper, ["--join-fd=6", "--", ...withRo], { join: "joined\n" });
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    assert.deepEqual(lines.slice(0, 4), ["host file", "now a file", "inside", "dir file was-a-dir "]);
    assert.deepEqual(
      lines.slice(4).map((l) => {
        const [point, options] = l.split(" ");
        return [point, ["ro", "nosuid", "nodev"].every((o) => options?.split(",").includes(o))];
      }),
      ["file", "dir", "was-a-dir"].map((name) => [join(stage, "etc", name), true]),
      "bound in order, each read-only, nosuid and nodev",
    );
    // On the host (the binds were the helper's namespace's only): the placeholders, empty.
    assert.equal(fs.readFileSync(join(etc, "file"), "utf8"), "");
    assert.ok(fs.statSync(join(etc, "dir")).isDirectory());
    assert.ok(fs.statSync(join(etc, "was-a-dir")).isFile(), "a placeholder of the other kind is made again");
    assert.ok(!fs.existsSync(join(etc, "missing")));
    fs.rmSync(etc, { recursive: true });
  });

  test("--net: the program runs in a new network namespace with only its loopback, up", async () => {
    const program = [
      "/bin/sh",
      "sh",
      "-c",
      "readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; grep -c '^00000000000000000000000000000001 .* lo$' /proc/net/if_inet6",
    ];
    const r = await runHelper(helper, ["--net", "--join-fd=6", "--", ...fields(program)], { join: "joined\n" });
    assert.equal(r.code, 0, r.stderr);
    const [ns, interfaces, v6] = r.stdout.trim().split("\n");
    assert.notEqual(ns, fs.readlinkSync("/proc/self/ns/net"), "not the host's network namespace");
    assert.equal(interfaces, "lo", "only a loopback");
    assert.equal(v6, "1", "up: the kernel gave it ::1");
    const without = await runHelper(helper, ["--join-fd=6", "--", ...fields(program)], { join: "joined\n" });
    assert.equal(without.stdout.split("\n")[0], fs.readlinkSync("/proc/self/ns/net"), "without --net, the host's");
  });

  test("a spare reads its fields and environment from the request pipe, and nothing of its own environment", async () => {
    const env = ["PATH=/usr/bin:/bin", "HOME=/workspace", "ODD=a b\nc'd"];
    const request = `${[String(env.length), ...env, ...fields([...report.slice(0, 4), stage])].join("\0")}\0`;
    const r = await runHelper(helper, ["--join-fd=6", "--request-fd=7", "--"], { join: "joined\n", request }, true);
    assert.equal(r.code, 0, r.stderr);
    const [status, mountinfo, oom, markers, ns, printed] = r.stdout.split("---\n");
    // env prints the one with a line break over two lines.
    checkReport([status, mountinfo, oom, markers, ns, ""].join("---\n"), [""]);
    assert.equal(printed, `${env.join("\n")}\n`);
  });

  test("anything but joined, a torn request, uid 0 or a failed mount: the program never runs", async () => {
    const program = ["/bin/echo", "echo", "ran"];
    const cases: [string, string[], { join?: string; request?: string }, RegExp][] = [
      ["another line", ["--join-fd=6", "--", ...fields(program)], { join: "nope\n" }, /cgroup/],
      ["the pipe's end", ["--join-fd=6", "--", ...fields(program)], {}, /pipe ended/],
      ["joined without its line break", ["--join-fd=6", "--", ...fields(program)], { join: "joined" }, /pipe ended/],
      [
        "a torn request",
        ["--join-fd=6", "--request-fd=7", "--"],
        { join: "joined\n", request: `0\0${fields(program).join("\0")}` },
        /ended early/,
      ],
      ["uid 0", ["--join-fd=6", "--", "0", ...fields(program).slice(1)], { join: "joined\n" }, /uid/],
      ["gid 0", ["--join-fd=6", "--", String(UID), "0", ...fields(program).slice(2)], { join: "joined\n" }, /gid/],
      [
        "a missing bind source",
        ["--join-fd=6", "--", ...fields(program).map((f) => (f === workspace ? `${workspace}-gone` : f))],
        { join: "joined\n" },
        /workspace/,
      ],
      [
        "a detach path that is no mount",
        ["--join-fd=6", "--", ...fields(program).map((f) => (f === detach ? workspace : f))],
        { join: "joined\n" },
        /Invalid argument/,
      ],
    ];
    for (const [what, args, input, message] of cases) {
      const r = await runHelper(helper, args, input);
      assert.equal(r.code, 1, `${what}: ${r.stderr}`);
      assert.equal(r.stdout, "", `${what}: the program did not run`);
      assert.match(r.stderr, message, what);
    }
  });

  test("--die-with-parent: the program (already the sandbox uid) ends with the helper's parent", async () => {
    const joined = join(dirs[0] as string, "..", `launch-helper-joined-${process.pid}`);
    fs.writeFileSync(joined, "joined\n");
    try {
      for (const die of [true, false]) {
        const flags = die ? "--die-with-parent " : "";
        // A parent shell starts the helper, prints its pid and exits half a second later.
        const out = execFileSync(
          "/bin/sh",
          [
            "-c",
            `"$0" ${flags}--join-fd=6 -- ${UID} ${UID} "" 0 0 /bin/sleep sleep 30 6<"$1" >/dev/null 2>&1 & echo $!; sleep 0.5`,
            helper,
            joined,
          ],
          { encoding: "utf8" },
        );
        const pid = Number(out.trim());
        const status = () => {
          try {
            return fs.readFileSync(`/proc/${pid}/status`, "utf8");
          } catch {
            return undefined;
          }
        };
        const alive = () => {
          const now = status();
          return now !== undefined && !/^State:\s+Z/m.test(now);
        };
        // Under load the kill (or, without the flag, the uid change) can take longer than the parent's half second.
        if (die) await until("the program killed when its parent exited after the uid change", () => !alive(), 10_000);
        else {
          await until(
            "the program runs as the sandbox uid",
            () => {
              const now = status();
              return now !== undefined && privileges(now).Uid === dropped(UID).Uid;
            },
            10_000,
          );
          await sleep(300);
          assert.ok(alive(), "without it, the program outlives its parent (the check above means something)");
          assert.deepEqual(privileges(status() ?? ""), dropped(UID));
          process.kill(pid, "SIGKILL");
        }
      }
    } finally {
      fs.rmSync(joined, { force: true });
    }
  });
});

describe("a sandbox's launcher, through the helper and through the shell chain", () => {
  after(async () => {
    assert.deepEqual(await removeTestCgroups(PREFIX), [], "every cgroup of this file can be removed");
  });

  /** What the sandbox's bwrap (the launch chain's last process, pid of its child) runs with and sees. */
  const launcherView = (driver: LocalDriver, id: string) => {
    const live = (
      driver as unknown as { sandboxes: Map<string, { child?: { pid?: number }; uid: number }> }
    ).sandboxes.get(id);
    const pid = live?.child?.pid;
    assert.ok(pid && live, "a running launch child");
    const exe = fs.readlinkSync(`/proc/${pid}/exe`);
    const seen = mounts(fs.readFileSync(`/proc/${pid}/mountinfo`, "utf8"));
    return {
      exe,
      privileges: privileges(fs.readFileSync(`/proc/${pid}/status`, "utf8")),
      expected: dropped(live.uid),
      oom: fs.readFileSync(`/proc/${pid}/oom_score_adj`, "utf8").trim(),
      staged: seen.filter((m) => m.point.startsWith(STAGE)).map((m) => m.point),
      readOnly: seen
        .filter((m) => ["ro", "nosuid", "nodev"].every((o) => m.options.split(",").includes(o)))
        .map((m) => m.point),
      workspacesTree: seen.filter((m) => m.point.startsWith(MOUNTS_ROOT)).map((m) => m.point),
      shared: seen.filter((m) => /shared:|master:/.test(m.optional)).map((m) => m.point),
      ownNamespace: fs.readlinkSync(`/proc/${pid}/ns/mnt`) !== fs.readlinkSync("/proc/self/ns/mnt"),
    };
  };

  const insideMounts = async (driver: LocalDriver, id: string) => {
    const r = await collectExec(driver, id, { command: "/bin/cat", args: ["/proc/self/mountinfo"] });
    assert.equal(r.completed.exitCode, 0);
    return mounts(r.stdout).map((m) => m.point);
  };

  const views: Record<string, string[]> = {};
  for (const launchHelper of [true, false]) {
    test(`${launchHelper ? "launch helper" : "shell chain"}: bwrap runs dropped in the launcher's namespace, fresh and after a released resume`, async () => {
      const dir = tempDir("compute-launch-helper-");
      fs.chmodSync(dir, 0o711);
      const driver = new LocalDriver({
        dataDir: dir,
        killGraceMs: 300,
        cgroupPrefix: `${PREFIX}-${launchHelper}`,
        dieWithService: true,
        warmSandboxes: 0,
        releasePausedAfterMs: 0,
        launchHelper,
      });
      try {
        await (driver as unknown as { built: Promise<unknown> }).built;
        assert.equal(
          (driver as unknown as { launchHelper?: string }).launchHelper !== undefined,
          launchHelper,
          "the chain asked for",
        );
        const spec = contractSpec("local");
        spec.workspace.size = "64Mi";
        await driver.create(spec);
        assert.equal((await driver.waitSettled(spec.sandboxId)).phase, "ready");
        const id = spec.sandboxId;
        for (const round of ["fresh", "resumed"]) {
          const v = launcherView(driver, id);
          assert.equal(v.exe, "/usr/bin/bwrap", `${round}: the chain ends in bwrap`);
          assert.deepEqual(v.privileges, v.expected, `${round}: bwrap runs as the sandbox uid with nothing else`);
          assert.equal(v.oom, OOM_SCORE_ADJ, round);
          assert.ok(v.ownNamespace, `${round}: in the launcher's own mount namespace`);
          // The host's allow-listed /etc files that exist, bound read-only into the stage's etc (bwrap binds it whole).
          const etc = hostEtcBinds(`${STAGE}/etc`).filter(([source]) => fs.existsSync(source));
          assert.ok(etc.length > 0, "the host has some of them");
          assert.deepEqual(
            v.staged,
            [STAGE, `${STAGE}/workspace`, ...etc.map(([, target]) => target)],
            `${round}: the stage, its workspace and the host's /etc files bound`,
          );
          assert.ok(
            etc.every(([, target]) => v.readOnly.includes(target)),
            `${round}: the /etc files are read-only, nosuid and nodev`,
          );
          assert.deepEqual(v.workspacesTree, [], `${round}: no workspace mount of the host held`);
          assert.deepEqual(v.shared, [], `${round}: every mount private`);
          const inside = await insideMounts(driver, id);
          views[`${launchHelper}-${round}`] = inside;
          if (round === "fresh") {
            await driver.pause(id);
            await until("released", () => driver.cgroupOf(id).isEmpty());
            // The release started a spare launcher of the same kind: the resume takes it.
            await until("a spare launcher", () =>
              Boolean((driver as unknown as { launcher: { spare?: { helper: boolean } } }).launcher.spare),
            );
            const spare = (driver as unknown as { launcher: { spare?: { helper: boolean } } }).launcher.spare;
            assert.equal(spare?.helper, launchHelper, "the spare is of the chain in use");
            assert.equal((await driver.resume(id)).phase, "ready");
          }
        }
        await driver.destroy(id);
      } finally {
        await driver.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  test("the sandbox sees the same mounts whichever chain started it", () => {
    const fresh = views["true-fresh"];
    assert.ok(fresh && fresh.length > 0, "the tests above ran");
    for (const key of ["true-resumed", "false-fresh", "false-resumed"]) assert.deepEqual(views[key], fresh, key);
  });

  test("where the launch helper cannot be built, sandboxes start through the shell chain", async () => {
    const tmp = tempDir("compute-no-launch-helper-");
    const dir = tempDir("compute-launch-fallback-");
    fs.chmodSync(dir, 0o711);
    const driver = withCompilerRefusing(
      "launch-helper.c",
      tmp,
      () =>
        new LocalDriver({
          dataDir: dir,
          killGraceMs: 300,
          cgroupPrefix: `${PREFIX}-fallback`,
          dieWithService: true,
          warmSandboxes: 0,
        }),
    );
    try {
      await (driver as unknown as { built: Promise<unknown> }).built;
      assert.equal((driver as unknown as { launchHelper?: string }).launchHelper, undefined, "not built");
      const spec = contractSpec("local");
      spec.workspace.size = "64Mi";
      await driver.create(spec);
      assert.equal((await driver.waitSettled(spec.sandboxId)).phase, "ready");
      const v = launcherView(driver, spec.sandboxId);
      assert.deepEqual(v.privileges, v.expected);
      const r = await collectExec(driver, spec.sandboxId, { command: "/bin/echo", args: ["hi"] });
      assert.equal(r.stdout, "hi\n");
      await driver.destroy(spec.sandboxId);
    } finally {
      await driver.close();
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe("the sandbox init", () => {
  after(async () => {
    assert.deepEqual(await removeTestCgroups(`${PREFIX}-init`), [], "every cgroup of this file can be removed");
  });

  /** The sandbox's pid 2 (bwrap's child), as its own ps would name it, and what it holds open. */
  const init = async (driver: LocalDriver, id: string) => {
    const r = await collectExec(driver, id, { command: "/bin/sh", args: ["-c", "cat /proc/2/comm; ls /proc/2/fd"] });
    assert.equal(r.completed.exitCode, 0, r.stderr);
    const [comm, ...fds] = r.stdout.trim().split("\n");
    return { comm, fds: fds.map(Number).sort() };
  };

  for (const built of [true, false]) {
    test(`${built ? "built: the sandbox-init program" : "where it cannot be built: a shell, then sleep"} is the sandbox's init, fresh and after a released resume`, async () => {
      const tmp = tempDir("compute-sandbox-init-");
      const dir = tempDir("compute-sandbox-init-data-");
      fs.chmodSync(dir, 0o711);
      const make = () =>
        new LocalDriver({
          dataDir: dir,
          killGraceMs: 300,
          cgroupPrefix: `${PREFIX}-init-${built}`,
          dieWithService: true,
          warmSandboxes: 0,
          releasePausedAfterMs: 0,
        });
      const driver = built ? make() : withCompilerRefusing("sandbox-init.c", tmp, make);
      try {
        await (driver as unknown as { built: Promise<unknown> }).built;
        assert.equal((driver as unknown as { sandboxInit?: string }).sandboxInit !== undefined, built);
        const spec = contractSpec("local");
        spec.workspace.size = "64Mi";
        const id = spec.sandboxId;
        await driver.create(spec);
        assert.equal((await driver.waitSettled(id)).phase, "ready");
        for (const round of ["fresh", "resumed"]) {
          if (built) {
            // Its readiness pipe and its own binary are closed: it holds stdin, stdout and the launch's stderr only.
            assert.deepEqual(await init(driver, id), { comm: "sandbox-init", fds: [0, 1, 2] }, round);
          } else {
            // The shell tells it is ready before it execs sleep.
            const end = Date.now() + 10_000;
            let comm = (await init(driver, id)).comm;
            while (comm === "sh" && Date.now() < end) comm = (await init(driver, id)).comm;
            assert.equal(comm, "sleep", round);
          }
          if (round === "fresh") {
            await driver.pause(id);
            await until("released", () => driver.cgroupOf(id).isEmpty());
            assert.equal((await driver.resume(id)).phase, "ready");
          }
        }
        await driver.destroy(id);
      } finally {
        await driver.close();
        fs.rmSync(dir, { recursive: true, force: true });
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    });
  }
});

/**
 * `make()` run with a fresh build directory (`tmp`) and a compiler that builds
 * every helper but `source`: a driver made so meets a host where that one
 * cannot be compiled. The environment is restored once it is made.
 */
function withCompilerRefusing<T>(source: string, tmp: string, make: () => T): T {
  const saved = { TMPDIR: process.env.TMPDIR, CC: process.env.CC };
  const cc = join(tmp, "cc");
  fs.writeFileSync(cc, `#!/bin/sh\ncase "$*" in *${source}*) echo "no" >&2; exit 1;; esac\nexec cc "$@"\n`, {
    mode: 0o755,
  });
  process.env.TMPDIR = tmp;
  process.env.CC = cc;
  try {
    return make();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
