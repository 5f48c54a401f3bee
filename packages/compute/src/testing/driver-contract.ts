import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { ExecEvent, ExecRequest, SandboxDriver, SandboxSpec } from "../driver.ts";

/** What a driver factory receives from the contract suite. */
export interface ContractDriverOptions {
  /** SIGTERM → SIGKILL grace; the suite uses a short one to stay fast. */
  killGraceMs: number;
}

export interface ContractFactoryResult {
  driver: SandboxDriver;
  /** Image for sandboxes (the local driver ignores it). */
  image?: string;
  cleanup?: () => Promise<void>;
  /**
   * Whether writes past workspace.size really fail (the local driver's ext4
   * image); false for a driver whose storage is only simulated here (the
   * Kubernetes API-server double), where only the size's validation applies.
   */
  enforcesWorkspaceSize?: boolean;
}

export type DriverFactory = (options: ContractDriverOptions) => Promise<ContractFactoryResult>;

/**
 * Which cases to register: all (default), or one group, so a slow driver
 * (the Kubernetes double) can run them as two files in parallel lanes.
 */
export type ContractCases = "all" | "core" | "pause";

const GRACE_MS = 400;
/**
 * How long a create may take to settle. Generous: on a host under heavy disk
 * I/O (a 1 GiB upload beside it in CI) a start, or a workspace image being
 * made, took far longer than the usual second.
 */
const SETTLE_MS = 120_000;

export function contractSpec(image: string, overrides: Partial<SandboxSpec["limits"]> = {}): SandboxSpec {
  return {
    sandboxId: randomUUID(),
    tenantId: randomUUID(),
    sessionId: randomUUID(),
    image,
    workspace: { storageClass: "", size: "", mountPath: "/workspace" },
    limits: { cpuMillis: 1000, memoryBytes: 256 * 1024 * 1024, maxRuntimeMs: 5 * 60_000, ...overrides },
    createdAt: new Date(),
  };
}

export interface CollectedExec {
  stdout: string;
  stderr: string;
  completed: Extract<ExecEvent, { type: "completed" }>;
  events: ExecEvent[];
}

export async function collectExec(
  driver: SandboxDriver,
  sandboxId: string,
  request: Partial<ExecRequest> & { command: string },
): Promise<CollectedExec> {
  const events: ExecEvent[] = [];
  const dec = { out: new TextDecoder(), err: new TextDecoder() };
  let stdout = "";
  let stderr = "";
  for await (const event of driver.exec(sandboxId, {
    args: [],
    env: {},
    workingDir: "/workspace",
    ...request,
  })) {
    events.push(event);
    if (event.type === "stdout") stdout += dec.out.decode(event.data, { stream: true });
    if (event.type === "stderr") stderr += dec.err.decode(event.data, { stream: true });
  }
  const last = events.at(-1);
  assert.ok(last && last.type === "completed", "the last event is completed");
  assert.equal(events.filter((e) => e.type === "completed").length, 1, "exactly one completed");
  return { stdout, stderr, completed: last, events };
}

async function rejectsWith(promise: Promise<unknown>, code: Code, reason?: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof PlatformError, `expected PlatformError, got ${String(err)}`);
    assert.equal(err.code, code, `expected code ${Code[code]}, got ${Code[err.code]}: ${err.message}`);
    if (reason) assert.equal(err.reason, reason, err.message);
    return true;
  });
}

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/**
 * The shared behaviour every SandboxDriver must show. Registers node:test
 * suites; call once per driver from a test file:
 *
 *   driverContract("local", async (o) => ({ driver: new LocalDriver({...o}) }));
 *
 * Commands used inside sandboxes are POSIX sh, sleep, ln, mkdir, cat and
 * /proc, which any sandbox image must provide.
 */
export function driverContract(name: string, makeDriver: DriverFactory, cases: ContractCases = "all"): void {
  const registered = (group: Exclude<ContractCases, "all">) =>
    cases === "all" || cases === group ? test : ((() => {}) as unknown as typeof test);
  const core = registered("core");
  const pause = registered("pause");
  describe(`SandboxDriver contract: ${name}${cases === "all" ? "" : ` (${cases} cases)`}`, () => {
    let driver: SandboxDriver;
    let image = "";
    let cleanup: (() => Promise<void>) | undefined;
    let enforcesWorkspaceSize = false;
    let ready: SandboxSpec;

    before(async () => {
      const made = await makeDriver({ killGraceMs: GRACE_MS });
      driver = made.driver;
      image = made.image ?? "contract-image";
      cleanup = made.cleanup;
      enforcesWorkspaceSize = made.enforcesWorkspaceSize ?? false;
      ready = contractSpec(image);
      await driver.create(ready);
      const settled = await driver.waitSettled(ready.sandboxId, AbortSignal.timeout(SETTLE_MS));
      assert.equal(settled.phase, "ready");
    });

    after(async () => {
      await driver.destroy(ready.sandboxId).catch(() => {});
      await driver.close();
      await cleanup?.();
    });

    core("create returns before the sandbox is settled and reaches ready; phase changes are announced", async () => {
      const spec = contractSpec(image);
      const seen: string[] = [];
      const off = driver.onPhaseChange((id, o) => {
        if (id === spec.sandboxId) seen.push(o.phase);
      });
      await driver.create(spec);
      const first = await driver.observe(spec.sandboxId);
      assert.ok(["starting", "ready"].includes(first.phase), first.phase);
      const settled = await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS));
      assert.equal(settled.phase, "ready");
      assert.equal((await driver.observe(spec.sandboxId)).phase, "ready");
      assert.ok(seen.includes("ready"), `phase changes seen: ${seen.join(",")}`);
      await driver.destroy(spec.sandboxId);
      off();
    });

    core("observe and exec on an unknown sandbox are NotFound", async () => {
      await rejectsWith(driver.observe(randomUUID()), Code.NotFound);
      await rejectsWith(driver.readFile(randomUUID(), "a", 0, 10), Code.NotFound);
    });

    core("exec streams stdout and stderr and completes with the exit code and this exec's usage", async () => {
      const r = await collectExec(driver, ready.sandboxId, {
        command: "/bin/sh",
        args: ["-c", "echo out; echo err >&2; exit 3"],
      });
      assert.equal(r.stdout, "out\n");
      assert.equal(r.stderr, "err\n");
      assert.equal(r.completed.exitCode, 3);
      assert.equal(r.completed.cancelled, false);
      assert.ok(r.completed.wallTimeMs >= 0);
      assert.equal(typeof r.completed.usage.cpuMs, "number");
    });

    core("exec honours args, env and working_dir", async () => {
      await driver.writeFile(ready.sandboxId, "sub/dir/marker", bytes("x"), false, 0o644);
      const r = await collectExec(driver, ready.sandboxId, {
        command: "/bin/sh",
        args: ["-c", 'printf "%s|%s|%s" "$1" "$GREETING" "$(pwd)"', "sh", "arg one"],
        env: { GREETING: "hello there" },
        workingDir: "/workspace/sub/dir",
      });
      assert.equal(r.stdout, "arg one|hello there|/workspace/sub/dir");
      assert.equal(r.completed.exitCode, 0);
    });

    core("a missing executable completes with a non-zero exit code, not a thrown error", async () => {
      const r = await collectExec(driver, ready.sandboxId, { command: "/no/such/binary" });
      assert.notEqual(r.completed.exitCode, 0);
    });

    core("the first stdout chunk arrives while the process is still running", async () => {
      await driver.writeFile(ready.sandboxId, "stream-go", bytes(""), false, 0o644).catch(() => {});
      // The process only finishes once the test, having seen "first", creates the file.
      const gate = `gate-${randomUUID()}`;
      const events: ExecEvent[] = [];
      let sawFirstBeforeGate = false;
      for await (const event of driver.exec(ready.sandboxId, {
        command: "/bin/sh",
        args: ["-c", `echo first; while [ ! -e ${gate} ]; do sleep 0.02; done; echo second`],
        env: {},
        workingDir: "/workspace",
      })) {
        events.push(event);
        if (event.type === "stdout" && text(event.data).includes("first") && !sawFirstBeforeGate) {
          sawFirstBeforeGate = true;
          await driver.writeFile(ready.sandboxId, gate, bytes("go"), false, 0o644);
        }
      }
      assert.ok(sawFirstBeforeGate);
      const out = events.flatMap((e) => (e.type === "stdout" ? [text(e.data)] : [])).join("");
      assert.equal(out, "first\nsecond\n");
      const last = events.at(-1);
      assert.ok(last?.type === "completed" && last.exitCode === 0);
    });

    core(
      "cancel sends SIGTERM to the whole tree and completes cancelled with exit -1; no process survives",
      async () => {
        const controller = new AbortController();
        const tag = `t${randomUUID().slice(0, 8)}`;
        const events: ExecEvent[] = [];
        // A shell with two background children and a grandchild that ignores nothing.
        const script = `sleep 1000 & sh -c 'sleep 1001 & wait' & echo ${tag}; wait`;
        for await (const event of driver.exec(ready.sandboxId, {
          command: "/bin/sh",
          args: ["-c", script],
          env: {},
          workingDir: "/workspace",
          signal: controller.signal,
        })) {
          events.push(event);
          if (event.type === "stdout" && text(event.data).includes(tag)) controller.abort();
        }
        const last = events.at(-1);
        assert.ok(last?.type === "completed");
        assert.equal(last.cancelled, true);
        assert.equal(last.exitCode, -1);
        const ps = await collectExec(driver, ready.sandboxId, {
          command: "/bin/sh",
          args: ["-c", "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done"],
        });
        assert.doesNotMatch(ps.stdout, /sleep 100[01]/, `survivors:\n${ps.stdout}`);
      },
    );

    core("a process ignoring SIGTERM is SIGKILLed after the grace", async () => {
      const controller = new AbortController();
      const events: ExecEvent[] = [];
      const started = Date.now();
      let abortedAt = 0;
      for await (const event of driver.exec(ready.sandboxId, {
        command: "/bin/sh",
        args: ["-c", "trap '' TERM; echo armed; while true; do sleep 0.05; done"],
        env: {},
        workingDir: "/workspace",
        signal: controller.signal,
      })) {
        events.push(event);
        if (event.type === "stdout" && !abortedAt) {
          abortedAt = Date.now();
          controller.abort();
        }
      }
      const last = events.at(-1);
      assert.ok(last?.type === "completed" && last.cancelled && last.exitCode === -1);
      const waited = Date.now() - abortedAt;
      assert.ok(waited >= GRACE_MS - 50, `killed after ${waited} ms, grace ${GRACE_MS}`);
      assert.ok(Date.now() - started < 30_000);
    });

    core("an exec aborted before it starts still ends with one cancelled completed", async () => {
      const r = await collectExec(driver, ready.sandboxId, {
        command: "/bin/sleep",
        args: ["30"],
        signal: AbortSignal.abort(),
      });
      assert.equal(r.completed.cancelled, true);
      assert.equal(r.completed.exitCode, -1);
    });

    core("write, read with offset and max_bytes, total_size and eof", async () => {
      const n = await driver.writeFile(ready.sandboxId, "files/a.txt", bytes("hello world"), false, 0o600);
      assert.equal(n, 11);
      const all = await driver.readFile(ready.sandboxId, "files/a.txt", 0, 16 << 20);
      assert.equal(text(all.data), "hello world");
      assert.equal(all.totalSize, 11);
      assert.equal(all.eof, true);
      const part = await driver.readFile(ready.sandboxId, "files/a.txt", 6, 3);
      assert.equal(text(part.data), "wor");
      assert.equal(part.totalSize, 11);
      assert.equal(part.eof, false);
      const tail = await driver.readFile(ready.sandboxId, "files/a.txt", 6, 5);
      assert.equal(text(tail.data), "world");
      assert.equal(tail.eof, true);
      const past = await driver.readFile(ready.sandboxId, "files/a.txt", 50, 5);
      assert.equal(past.data.length, 0);
      assert.equal(past.eof, true);
    });

    core("append appends, a plain write truncates, mode applies on create only", async () => {
      await driver.writeFile(ready.sandboxId, "files/m.txt", bytes("one"), false, 0o640);
      await driver.writeFile(ready.sandboxId, "files/m.txt", bytes("+two"), true, 0o777);
      assert.equal(text((await driver.readFile(ready.sandboxId, "files/m.txt", 0, 100)).data), "one+two");
      await driver.writeFile(ready.sandboxId, "files/m.txt", bytes("z"), false, 0o777);
      assert.equal(text((await driver.readFile(ready.sandboxId, "files/m.txt", 0, 100)).data), "z");
      const list = await driver.listFiles(ready.sandboxId, "files", false, 1000);
      const entry = list.entries.find((e) => e.path === "m.txt");
      assert.ok(entry);
      assert.equal(entry.mode, 0o640);
      assert.equal(entry.size, 1);
      assert.equal(entry.isDir, false);
      // The file written by the service is usable from inside the sandbox.
      const r = await collectExec(driver, ready.sandboxId, { command: "/bin/cat", args: ["files/m.txt"] });
      assert.equal(r.stdout, "z");
    });

    core("files written by a command are readable through readFile", async () => {
      await collectExec(driver, ready.sandboxId, { command: "/bin/sh", args: ["-c", "echo made-inside > inside.txt"] });
      assert.equal(text((await driver.readFile(ready.sandboxId, "inside.txt", 0, 100)).data), "made-inside\n");
    });

    core("listFiles: flat and recursive, paths relative to the listed dir, dirs size 0, truncation", async () => {
      await driver.writeFile(ready.sandboxId, "tree/a", bytes("12345"), false, 0o644);
      await driver.writeFile(ready.sandboxId, "tree/d/b", bytes("1"), false, 0o644);
      await driver.writeFile(ready.sandboxId, "tree/d/e/c", bytes("1"), false, 0o644);
      const flat = await driver.listFiles(ready.sandboxId, "tree", false, 1000);
      assert.deepEqual(flat.entries.map((e) => e.path).sort(), ["a", "d"]);
      assert.equal(flat.truncated, false);
      const dir = flat.entries.find((e) => e.path === "d");
      assert.ok(dir?.isDir);
      assert.equal(dir.size, 0);
      assert.equal(flat.entries.find((e) => e.path === "a")?.size, 5);
      assert.ok(flat.entries.every((e) => e.modifiedAt instanceof Date && !Number.isNaN(e.modifiedAt.getTime())));
      const deep = await driver.listFiles(ready.sandboxId, "tree", true, 1000);
      assert.deepEqual(deep.entries.map((e) => e.path).sort(), ["a", "d", "d/b", "d/e", "d/e/c"]);
      const capped = await driver.listFiles(ready.sandboxId, "tree", true, 2);
      assert.equal(capped.entries.length, 2);
      assert.equal(capped.truncated, true);
      const root = await driver.listFiles(ready.sandboxId, "", false, 1000);
      assert.ok(root.entries.some((e) => e.path === "tree" && e.isDir));
    });

    core("missing files are NotFound; reading a directory is InvalidArgument", async () => {
      await rejectsWith(driver.readFile(ready.sandboxId, "nope/nothing", 0, 10), Code.NotFound);
      await rejectsWith(driver.listFiles(ready.sandboxId, "nope", false, 10), Code.NotFound);
      await driver.writeFile(ready.sandboxId, "adir/x", bytes("x"), false, 0o644);
      await rejectsWith(driver.readFile(ready.sandboxId, "adir", 0, 10), Code.InvalidArgument);
    });

    core(
      "symlinks inside the mount are followed; ones leaving it are PermissionDenied (also intermediate)",
      async () => {
        await collectExec(driver, ready.sandboxId, {
          command: "/bin/sh",
          args: [
            "-c",
            [
              "mkdir -p links/real && echo inner > links/real/f",
              "ln -sfn real links/in",
              "ln -sfn /workspace/links/real/f links/abs-in",
              "ln -sfn /etc links/out",
              "ln -sfn ../../.. links/up",
              "ln -sfn /etc/hostname links/file-out",
            ].join(" && "),
          ],
        });
        assert.equal(text((await driver.readFile(ready.sandboxId, "links/in/f", 0, 100)).data), "inner\n");
        assert.equal(text((await driver.readFile(ready.sandboxId, "links/abs-in", 0, 100)).data), "inner\n");
        await rejectsWith(driver.readFile(ready.sandboxId, "links/out/hostname", 0, 100), Code.PermissionDenied);
        await rejectsWith(driver.readFile(ready.sandboxId, "links/file-out", 0, 100), Code.PermissionDenied);
        await rejectsWith(driver.readFile(ready.sandboxId, "links/up/etc/hostname", 0, 100), Code.PermissionDenied);
        await rejectsWith(
          driver.writeFile(ready.sandboxId, "links/out/evil", bytes("x"), false, 0o644),
          Code.PermissionDenied,
        );
        await rejectsWith(
          driver.writeFile(ready.sandboxId, "links/file-out", bytes("x"), false, 0o644),
          Code.PermissionDenied,
        );
        await rejectsWith(driver.listFiles(ready.sandboxId, "links/out", false, 10), Code.PermissionDenied);
        await rejectsWith(driver.listFiles(ready.sandboxId, "links/up", true, 10), Code.PermissionDenied);
        await driver.writeFile(ready.sandboxId, "links/in/g", bytes("via-link"), false, 0o644);
        assert.equal(text((await driver.readFile(ready.sandboxId, "links/real/g", 0, 100)).data), "via-link");
      },
    );

    core("usage grows with real work and destroy returns lifetime usage", async () => {
      const spec = contractSpec(image);
      await driver.create(spec);
      const settled = await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS));
      assert.equal(settled.phase, "ready", `settled as ${JSON.stringify(settled)}`);
      const r = await collectExec(driver, spec.sandboxId, {
        command: "/bin/sh",
        // The last sleep keeps the command alive past the first memory sample of a driver that samples
        // (Kubernetes: /proc every 100 ms): under CI load the ~70 ms loop once ended before it.
        args: [
          "-c",
          "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done; head -c 300000 /dev/zero > blob; echo done; sleep 0.3",
        ],
      });
      const seen = () =>
        `exit ${r.completed.exitCode}, stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr.slice(0, 500))}, exec usage ${JSON.stringify(r.completed.usage)}`;
      assert.equal(r.stdout, "done\n", seen());
      assert.ok(r.completed.usage.cpuMs > 0, `exec cpu_ms: ${seen()}`);
      assert.ok(r.completed.usage.memoryPeakBytes > 0, `exec memory peak: ${seen()}`);
      const now = await driver.usage(spec.sandboxId);
      assert.ok(now.cpuMs >= r.completed.usage.cpuMs, `sandbox usage ${JSON.stringify(now)}; ${seen()}`);
      assert.ok(now.memoryPeakBytes > 0, `sandbox usage ${JSON.stringify(now)}`);
      const total = await driver.destroy(spec.sandboxId);
      assert.ok(total.cpuMs >= r.completed.usage.cpuMs, `lifetime usage ${JSON.stringify(total)}; ${seen()}`);
      const again = await driver.destroy(spec.sandboxId);
      assert.equal(again.cpuMs, total.cpuMs, `second destroy ${JSON.stringify(again)}, first ${JSON.stringify(total)}`);
    });

    core(
      "after destroy the sandbox is gone: exec is FailedPrecondition; GC removes it only after the grace",
      async () => {
        const spec = contractSpec(image);
        await driver.create(spec);
        await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS));
        await driver.writeFile(spec.sandboxId, "keep.txt", bytes("x"), false, 0o644);
        await driver.destroy(spec.sandboxId);
        assert.equal((await driver.observe(spec.sandboxId)).phase, "gone");
        await rejectsWith(
          (async () => {
            for await (const _ of driver.exec(spec.sandboxId, {
              command: "/bin/true",
              args: [],
              env: {},
              workingDir: "/workspace",
            })) {
            }
          })(),
          Code.FailedPrecondition,
          ComputeReason.sandboxNotRunnable,
        );
        assert.ok(!(await driver.collectGarbage(new Date())).includes(spec.sandboxId));
        const later = new Date(Date.now() + 24 * 3600_000 + 60_000);
        assert.ok((await driver.collectGarbage(later)).includes(spec.sandboxId));
      },
    );

    core("a malformed or out-of-range workspace size is InvalidArgument, before anything is provisioned", async () => {
      for (const size of ["not-a-size", "64MB", "-1Gi", "1Mi", "2Ti"]) {
        const spec = contractSpec(image);
        spec.workspace.size = size;
        await rejectsWith(driver.create(spec), Code.InvalidArgument);
        await rejectsWith(driver.observe(spec.sandboxId), Code.NotFound);
      }
    });

    core(
      "workspace.size is enforced: a command writing past it gets ENOSPC, writeFile ResourceExhausted; the sandbox stays ready",
      async (t) => {
        if (!enforcesWorkspaceSize)
          return t.skip("this driver's storage is simulated: only the size's validation applies");
        const spec = contractSpec(image);
        spec.workspace.size = "64Mi";
        await driver.create(spec);
        assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS))).phase, "ready");
        const r = await collectExec(driver, spec.sandboxId, {
          command: "/bin/sh",
          args: ["-c", "head -c 100000000 /dev/zero > big"],
        });
        assert.notEqual(r.completed.exitCode, 0);
        assert.match(r.stderr, /No space left on device/);
        await rejectsWith(
          driver.writeFile(spec.sandboxId, "more", new Uint8Array(1 << 20), false, 0o644),
          Code.ResourceExhausted,
        );
        assert.equal((await driver.observe(spec.sandboxId)).phase, "ready");
        const after = await collectExec(driver, spec.sandboxId, {
          command: "/bin/sh",
          args: ["-c", "rm big && echo freed > note && cat note"],
        });
        assert.equal(after.stdout, "freed\n");
        await driver.destroy(spec.sandboxId);
      },
    );

    /** A sandbox of session (tenant, session) taken from `of`, READY. */
    const sessionSandbox = async (
      of: SandboxSpec,
      limits: Partial<SandboxSpec["limits"]> = {},
    ): Promise<SandboxSpec> => {
      const spec = { ...contractSpec(image, limits), tenantId: of.tenantId, sessionId: of.sessionId };
      await driver.create(spec);
      assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS))).phase, "ready");
      return spec;
    };
    /** Files, modes and times a command and a file call leave in a workspace. */
    const seed = async (id: string) => {
      await driver.writeFile(id, "notes/by-call.txt", bytes("written by a call"), false, 0o600);
      const r = await collectExec(driver, id, {
        command: "/bin/sh",
        args: [
          "-c",
          "mkdir -p src/deep && printf 'echo hi' > src/deep/run.sh && chmod 750 src/deep/run.sh && touch -d @1700000000 src/deep/run.sh",
        ],
      });
      assert.equal(r.completed.exitCode, 0, r.stderr);
    };
    const seen = async (id: string) => {
      const list = await driver.listFiles(id, "", true, 1000);
      const run = list.entries.find((e) => e.path === "src/deep/run.sh");
      const note = list.entries.find((e) => e.path === "notes/by-call.txt");
      return {
        run: run && { mode: run.mode, mtime: run.modifiedAt.getTime(), size: run.size },
        note: note && { mode: note.mode, text: text((await driver.readFile(id, "notes/by-call.txt", 0, 100)).data) },
        // The new sandbox's processes can use what the old one left (same owner).
        inside: (
          await collectExec(driver, id, {
            command: "/bin/sh",
            args: ["-c", "sh src/deep/run.sh && echo more >> notes/by-call.txt && echo ok"],
          })
        ).stdout,
      };
    };
    const expected = {
      run: { mode: 0o750, mtime: 1700000000_000, size: 7 },
      note: { mode: 0o600, text: "written by a call" },
      inside: "hi\nok\n",
    };

    core(
      "the workspace belongs to the session: a new sandbox after DestroySandbox mounts the same files, modes and times; GC spares it while used",
      async () => {
        const first = await sessionSandbox(contractSpec(image));
        await seed(first.sandboxId);
        await driver.destroy(first.sandboxId);
        const second = await sessionSandbox(first);
        assert.deepEqual(await seen(second.sandboxId), expected);
        // The first sandbox's grace has passed, but the session uses its workspace again.
        await driver.collectGarbage(new Date(Date.now() + 24 * 3600_000 + 60_000));
        assert.equal(
          text((await driver.readFile(second.sandboxId, "notes/by-call.txt", 0, 100)).data),
          "written by a callmore\n",
        );
        await driver.destroy(second.sandboxId);
        // Once the session's last sandbox is gone and the grace has passed, GC removes the workspace.
        await driver.collectGarbage(new Date(Date.now() + 24 * 3600_000 + 60_000));
        const third = await sessionSandbox(first);
        assert.deepEqual((await driver.listFiles(third.sandboxId, "", false, 100)).entries, []);
        await driver.destroy(third.sandboxId);
      },
    );

    core(
      "the workspace belongs to the session: a new sandbox after one FAILED at max_runtime has its files",
      async () => {
        // Room to seed it on a loaded machine before it fails.
        const first = await sessionSandbox(contractSpec(image), { maxRuntimeMs: 8000 });
        await seed(first.sandboxId);
        let o = await driver.observe(first.sandboxId);
        for (let i = 0; i < 300 && o.phase === "ready"; i++) {
          await new Promise((r) => setTimeout(r, 100));
          o = await driver.observe(first.sandboxId);
        }
        assert.equal(o.phase, "failed");
        const second = await sessionSandbox(first);
        assert.deepEqual(await seen(second.sandboxId), expected);
        await driver.destroy(second.sandboxId);
        await driver.destroy(first.sandboxId);
      },
    );

    core("two sandboxes created at once for one session share one workspace", async () => {
      const of = contractSpec(image);
      const [a, b] = await Promise.all([sessionSandbox(of), sessionSandbox(of)]);
      await driver.writeFile(a.sandboxId, "shared.txt", bytes("from a"), false, 0o644);
      assert.equal(
        (await collectExec(driver, b.sandboxId, { command: "/bin/cat", args: ["shared.txt"] })).stdout,
        "from a",
      );
      await driver.destroy(a.sandboxId);
      // Still used by b: destroying a does not take it away.
      assert.equal(text((await driver.readFile(b.sandboxId, "shared.txt", 0, 100)).data), "from a");
      assert.equal(
        (await collectExec(driver, b.sandboxId, { command: "/bin/cat", args: ["shared.txt"] })).stdout,
        "from a",
      );
      await driver.destroy(b.sandboxId);
    });

    core("sandboxes of other sessions never see the workspace", async () => {
      const mine = await sessionSandbox(contractSpec(image));
      await driver.writeFile(mine.sandboxId, "secret.txt", bytes("mine"), false, 0o600);
      const sameSessionOtherTenant = { ...contractSpec(image), sessionId: mine.sessionId };
      await driver.create(sameSessionOtherTenant);
      await driver.waitSettled(sameSessionOtherTenant.sandboxId, AbortSignal.timeout(SETTLE_MS));
      await rejectsWith(driver.readFile(sameSessionOtherTenant.sandboxId, "secret.txt", 0, 10), Code.NotFound);
      await driver.destroy(sameSessionOtherTenant.sandboxId);
      await driver.destroy(mine.sandboxId);
    });

    pause(
      "a full workspace: ENOSPC and ResourceExhausted, then the sandbox works, pauses and resumes; the session's next sandbox mounts it with its files; deleting frees space",
      async (t) => {
        if (!enforcesWorkspaceSize)
          return t.skip("this driver's storage is simulated: only the size's validation applies");
        const first = { ...contractSpec(image), workspace: { ...contractSpec(image).workspace, size: "64Mi" } };
        await driver.create(first);
        assert.equal((await driver.waitSettled(first.sandboxId, AbortSignal.timeout(SETTLE_MS))).phase, "ready");
        await seed(first.sandboxId);
        const fill = await collectExec(driver, first.sandboxId, {
          command: "/bin/sh",
          args: ["-c", "head -c 100000000 /dev/zero > big"],
        });
        assert.notEqual(fill.completed.exitCode, 0);
        assert.match(fill.stderr, /No space left on device/);
        await rejectsWith(
          driver.writeFile(first.sandboxId, "more", new Uint8Array(1 << 20), false, 0o644),
          Code.ResourceExhausted,
        );
        const reads = async (id: string) =>
          (
            await collectExec(driver, id, {
              command: "/bin/sh",
              args: ["-c", "cat notes/by-call.txt; echo; sh src/deep/run.sh"],
            })
          ).stdout;
        assert.equal(await reads(first.sandboxId), "written by a call\nhi\n");
        await driver.pause(first.sandboxId);
        assert.equal((await driver.observe(first.sandboxId)).phase, "paused");
        assert.equal((await driver.resume(first.sandboxId)).phase, "ready");
        assert.equal(await reads(first.sandboxId), "written by a call\nhi\n");
        await driver.destroy(first.sandboxId);
        // The session's next sandbox mounts the full workspace: files intact, still full.
        const second = { ...contractSpec(image), tenantId: first.tenantId, sessionId: first.sessionId };
        second.workspace.size = "64Mi";
        await driver.create(second);
        const settled = await driver.waitSettled(second.sandboxId, AbortSignal.timeout(SETTLE_MS));
        assert.equal(settled.phase, "ready", JSON.stringify(settled));
        assert.deepEqual(await seen(second.sandboxId), expected);
        const big = (await driver.listFiles(second.sandboxId, "", false, 100)).entries.find((e) => e.path === "big");
        assert.ok(big && big.size > 32 * 1024 * 1024, `the filled file is there: ${JSON.stringify(big)}`);
        await rejectsWith(
          driver.writeFile(second.sandboxId, "more", new Uint8Array(1 << 20), false, 0o644),
          Code.ResourceExhausted,
        );
        // Deleting a file frees its space, for commands and file calls alike.
        const freed = await collectExec(driver, second.sandboxId, {
          command: "/bin/sh",
          args: ["-c", "rm big && head -c 8000000 /dev/zero > again && echo ok"],
        });
        assert.equal(freed.stdout, "ok\n", freed.stderr);
        await driver.writeFile(second.sandboxId, "more", new Uint8Array(1 << 20), false, 0o644);
        assert.equal(
          (await driver.listFiles(second.sandboxId, "", false, 100)).entries.find((e) => e.path === "more")?.size,
          1 << 20,
        );
        await driver.destroy(second.sandboxId);
      },
    );

    pause(
      "pause keeps the workspace: paused is observable, usage readable, exec refused until resume; files written before and by the resumed sandbox are there",
      async () => {
        const spec = await sessionSandbox(contractSpec(image));
        await seed(spec.sandboxId);
        const before = await driver.usage(spec.sandboxId);
        const seenPhases: string[] = [];
        const off = driver.onPhaseChange((id, o) => {
          if (id === spec.sandboxId) seenPhases.push(o.phase);
        });
        await driver.pause(spec.sandboxId);
        await driver.pause(spec.sandboxId); // idempotent
        assert.equal((await driver.observe(spec.sandboxId)).phase, "paused");
        const during = await driver.usage(spec.sandboxId);
        assert.ok(during.cpuMs >= before.cpuMs, `usage while paused ${during.cpuMs} < ${before.cpuMs}`);
        await rejectsWith(
          (async () => {
            for await (const _ of driver.exec(spec.sandboxId, {
              command: "/bin/true",
              args: [],
              env: {},
              workingDir: "/workspace",
            })) {
            }
          })(),
          Code.FailedPrecondition,
          // The domain asks a known sandbox's exec of the driver first and resumes only on this refusal.
          ComputeReason.sandboxNotRunnable,
        );
        const resumed = await driver.resume(spec.sandboxId, AbortSignal.timeout(60_000));
        assert.equal(resumed.phase, "ready");
        assert.equal((await driver.resume(spec.sandboxId, AbortSignal.timeout(60_000))).phase, "ready"); // idempotent
        assert.deepEqual(seenPhases.slice(0, 1), ["paused"]);
        assert.ok(seenPhases.includes("ready"), seenPhases.join(","));
        assert.deepEqual(await seen(spec.sandboxId), expected);
        assert.ok((await driver.usage(spec.sandboxId)).cpuMs >= during.cpuMs);
        off();
        await driver.destroy(spec.sandboxId);
      },
    );

    pause(
      "two resumes at once both see it ready; a paused sandbox can be destroyed, and its session's next sandbox has the files",
      async () => {
        const spec = await sessionSandbox(contractSpec(image));
        await driver.writeFile(spec.sandboxId, "kept.txt", bytes("across pauses"), false, 0o644);
        await driver.pause(spec.sandboxId);
        const both = await Promise.all([
          driver.resume(spec.sandboxId, AbortSignal.timeout(60_000)),
          driver.resume(spec.sandboxId, AbortSignal.timeout(60_000)),
        ]);
        assert.deepEqual(
          both.map((o) => o.phase),
          ["ready", "ready"],
        );
        assert.equal(
          (await collectExec(driver, spec.sandboxId, { command: "/bin/cat", args: ["kept.txt"] })).stdout,
          "across pauses",
        );
        await driver.pause(spec.sandboxId);
        const total = await driver.destroy(spec.sandboxId);
        assert.equal(typeof total.cpuMs, "number");
        assert.equal((await driver.observe(spec.sandboxId)).phase, "gone");
        await rejectsWith(driver.resume(spec.sandboxId), Code.FailedPrecondition);
        assert.equal((await driver.destroy(spec.sandboxId)).cpuMs, total.cpuMs);
        const next = await sessionSandbox(spec);
        assert.equal(text((await driver.readFile(next.sandboxId, "kept.txt", 0, 100)).data), "across pauses");
        await driver.destroy(next.sandboxId);
      },
    );

    pause(
      "resume racing destroy: one outcome each (resumed then destroyed, or refused), the sandbox ends gone and nothing of it runs",
      async () => {
        for (let round = 0; round < 2; round++) {
          const spec = await sessionSandbox(contractSpec(image));
          await driver.writeFile(spec.sandboxId, "race.txt", bytes(`round ${round}`), false, 0o644);
          await driver.pause(spec.sandboxId);
          // Each order once: resume asked first, then destroy first.
          const calls: [Promise<unknown>, Promise<unknown>] =
            round === 0
              ? [driver.resume(spec.sandboxId, AbortSignal.timeout(60_000)), driver.destroy(spec.sandboxId)]
              : [driver.destroy(spec.sandboxId), driver.resume(spec.sandboxId, AbortSignal.timeout(60_000))];
          const [first, second] = await Promise.allSettled(calls);
          const resume = round === 0 ? first : second;
          const destroy = round === 0 ? second : first;
          assert.equal(destroy.status, "fulfilled", String((destroy as PromiseRejectedResult).reason));
          if (resume.status === "rejected") {
            assert.ok(
              resume.reason instanceof PlatformError && resume.reason.code === Code.FailedPrecondition,
              String(resume.reason),
            );
          } else {
            assert.equal((resume.value as { phase: string }).phase, "ready");
          }
          // Settled: gone, and it stays gone (a resume never brings it back later).
          await new Promise((r) => setTimeout(r, 300));
          assert.equal((await driver.observe(spec.sandboxId)).phase, "gone");
          await rejectsWith(
            (async () => {
              for await (const _ of driver.exec(spec.sandboxId, {
                command: "/bin/true",
                args: [],
                env: {},
                workingDir: "/workspace",
              })) {
              }
            })(),
            Code.FailedPrecondition,
          );
          const next = await sessionSandbox(spec);
          assert.equal(text((await driver.readFile(next.sandboxId, "race.txt", 0, 100)).data), `round ${round}`);
          await driver.destroy(next.sandboxId);
        }
      },
    );

    pause(
      "max runtime counts running time only: a sandbox paused past its max runtime resumes ready and runs out only its remaining running time",
      async () => {
        const maxRuntimeMs = 10_000;
        const spec = contractSpec(image, { maxRuntimeMs });
        await driver.create(spec);
        assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS))).phase, "ready");
        await driver.pause(spec.sandboxId);
        // Running time used so far (at most this much: the pause was taken before now).
        const ranMs = Date.now() - spec.createdAt.getTime();
        // Paused until well past createdAt + max runtime.
        await new Promise((r) =>
          setTimeout(r, Math.max(0, spec.createdAt.getTime() + maxRuntimeMs + 1000 - Date.now())),
        );
        assert.equal((await driver.observe(spec.sandboxId)).phase, "paused");
        assert.equal((await driver.resume(spec.sandboxId, AbortSignal.timeout(60_000))).phase, "ready");
        const resumedAt = Date.now();
        const deadline = Date.now() + 40_000;
        let o = await driver.observe(spec.sandboxId);
        while (o.phase === "ready" && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 100));
          o = await driver.observe(spec.sandboxId);
        }
        assert.equal(o.phase, "failed");
        assert.equal(o.reason, "deadline");
        // It ran out what was left of its running time, not less (a lower bound: a loaded machine only makes it later).
        const ranAfterMs = Date.now() - resumedAt;
        assert.ok(
          ranAfterMs >= maxRuntimeMs - ranMs - 1000,
          `ran ${ranAfterMs} ms after the resume; ${maxRuntimeMs - ranMs} ms of running time were left`,
        );
        await driver.destroy(spec.sandboxId);
      },
    );

    pause("pause and resume of an unknown sandbox are NotFound", async () => {
      await rejectsWith(driver.pause(randomUUID()), Code.NotFound);
      await rejectsWith(driver.resume(randomUUID()), Code.NotFound);
    });

    core("a sandbox past its max runtime fails with reason deadline", async () => {
      const spec = contractSpec(image, { maxRuntimeMs: 1500 });
      await driver.create(spec);
      assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(SETTLE_MS))).phase, "ready");
      const deadline = Date.now() + 20_000;
      let o = await driver.observe(spec.sandboxId);
      while (o.phase === "ready" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        o = await driver.observe(spec.sandboxId);
      }
      assert.equal(o.phase, "failed");
      assert.equal(o.reason, "deadline");
      await rejectsWith(
        (async () => {
          for await (const _ of driver.exec(spec.sandboxId, {
            command: "/bin/true",
            args: [],
            env: {},
            workingDir: "/workspace",
          })) {
          }
        })(),
        Code.FailedPrecondition,
      );
      await driver.destroy(spec.sandboxId);
    });
  });
}
