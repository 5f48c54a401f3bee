// Domain rules with a scripted driver (no sandboxes, no database).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import {
  type ExecEvent,
  type ExecRequest,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  zeroUsage,
} from "../driver.ts";
import { MemorySandboxStore } from "../store/sandbox-store.ts";
import { ComputeDomain, execTimeoutMs } from "./compute-domain.ts";

/** A driver whose phases the test drives by hand. */
class ScriptedDriver implements SandboxDriver {
  readonly name = "scripted";
  phases = new Map<string, SandboxObservation>();
  specs = new Map<string, SandboxSpec>();
  lastExec?: ExecRequest;
  /** Execs that ran (not refused). */
  execs = 0;
  private listeners = new Set<(id: string, o: SandboxObservation) => void>();
  private waiters = new Map<string, Array<() => void>>();

  set(id: string, o: SandboxObservation) {
    this.phases.set(id, o);
    for (const l of this.listeners) l(id, o);
    if (o.phase !== "starting") for (const w of this.waiters.get(id) ?? []) w();
  }
  async create(spec: SandboxSpec) {
    this.specs.set(spec.sandboxId, spec);
    this.phases.set(spec.sandboxId, { phase: "starting" });
  }
  async recover(spec: SandboxSpec) {
    return this.phases.get(spec.sandboxId) ?? { phase: "failed" as const, reason: "lost" as const };
  }
  observes = 0;
  async observe(id: string) {
    this.observes++;
    const o = this.phases.get(id);
    if (!o) throw PlatformError.notFound("no");
    return o;
  }
  waitSettled(id: string, signal?: AbortSignal): Promise<SandboxObservation> {
    const o = this.phases.get(id);
    if (o && o.phase !== "starting") return Promise.resolve(o);
    return new Promise((resolve, reject) => {
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      this.waiters.set(id, [...(this.waiters.get(id) ?? []), () => resolve(this.phases.get(id) as SandboxObservation)]);
    });
  }
  onPhaseChange(l: (id: string, o: SandboxObservation) => void) {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
  async *exec(id: string, request: ExecRequest): AsyncGenerator<ExecEvent> {
    // As the driver contract says: refused before anything runs unless READY.
    const o = this.phases.get(id);
    if (!o) throw PlatformError.notFound("no", ComputeReason.sandboxNotFound);
    if (o.phase !== "ready")
      throw PlatformError.failedPrecondition(`sandbox is ${o.phase}`, ComputeReason.sandboxNotRunnable);
    this.execs++;
    this.lastExec = request;
    yield { type: "stdout", data: new TextEncoder().encode("started\n") };
    // Runs until cancelled, like `sleep infinity`.
    if (!request.signal?.aborted) {
      await new Promise((r) => request.signal?.addEventListener("abort", r, { once: true }));
    }
    yield { type: "completed", exitCode: -1, wallTimeMs: 1, cancelled: true, usage: zeroUsage() };
  }
  async readFile() {
    return { data: new Uint8Array(), totalSize: 0, eof: true };
  }
  async writeFile(_id: string, _p: string, data: Uint8Array) {
    return data.length;
  }
  async listFiles() {
    return { entries: [], truncated: false };
  }
  async usage() {
    return zeroUsage();
  }
  pauses = 0;
  resumes = 0;
  /** Resolves a resume when the test says (null: at once). */
  resumeGate: Promise<void> | null = null;
  async pause(id: string) {
    const o = this.phases.get(id);
    if (o?.phase === "paused") return;
    if (o?.phase !== "ready") throw PlatformError.failedPrecondition(`sandbox is ${o?.phase}`);
    this.pauses++;
    this.set(id, { phase: "paused" });
  }
  async resume(id: string) {
    await this.resumeGate;
    const o = this.phases.get(id);
    if (o?.phase === "ready") return o;
    if (o?.phase !== "paused") throw PlatformError.failedPrecondition(`sandbox is ${o?.phase}`);
    this.resumes++;
    this.set(id, { phase: "ready" });
    return { phase: "ready" as const };
  }
  async destroy(id: string) {
    this.phases.set(id, { phase: "gone" });
    return { ...zeroUsage(), cpuMs: 42 };
  }
  async collectGarbage() {
    return [];
  }
  async close() {}
}

function setup(readyTimeoutMs = 5000) {
  const driver = new ScriptedDriver();
  const store = new MemorySandboxStore();
  const domain = new ComputeDomain({
    driver,
    store,
    defaults: { image: "img", storageClass: "sc", workspaceSize: "1Gi" },
    readyTimeoutMs,
  });
  return { driver, store, domain };
}

async function code(p: Promise<unknown> | (() => Promise<unknown>), expected: Code, reason?: string) {
  await assert.rejects(typeof p === "function" ? p() : p, (e: unknown) => {
    assert.ok(e instanceof PlatformError, String(e));
    assert.equal(e.code, expected, `${Code[e.code]}: ${e.message}`);
    if (reason) assert.equal(e.reason, reason);
    return true;
  });
}

const drain = async (it: AsyncIterable<ExecEvent>) => {
  const out: ExecEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
};

const ids = () => ({ tenantId: randomUUID(), sessionId: randomUUID() });

describe("ComputeDomain", () => {
  test("exec timeout: unset or above 600 s is 600 s", () => {
    assert.equal(execTimeoutMs(undefined), 600_000);
    assert.equal(execTimeoutMs(0), 600_000);
    assert.equal(execTimeoutMs(700_000), 600_000);
    assert.equal(execTimeoutMs(600_000), 600_000);
    assert.equal(execTimeoutMs(5000), 5000);
  });

  test("ExecCommand waits for READY and gives DEADLINE_EXCEEDED when it never comes", async () => {
    const { domain } = setup(150);
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    const started = Date.now();
    await code(
      drain(domain.execCommand({ sandboxId, command: "/bin/true" })),
      Code.DeadlineExceeded,
      ComputeReason.readyTimeout,
    );
    assert.ok(Date.now() - started >= 140);
  });

  test("ExecCommand proceeds once the sandbox turns READY while waiting", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    setTimeout(() => driver.set(sandboxId, { phase: "ready" }), 50);
    const controller = new AbortController();
    const events: ExecEvent[] = [];
    for await (const e of domain.execCommand({ sandboxId, command: "/bin/x", signal: controller.signal })) {
      events.push(e);
      if (e.type === "stdout") controller.abort();
    }
    assert.deepEqual(
      events.map((e) => e.type),
      ["stdout", "completed"],
    );
    assert.equal((await store.get(sandboxId))?.status, "READY");
  });

  test("an exec on a READY sandbox is one call down to the driver; a paused one is refused there, resumed, and run once", async () => {
    const { domain, driver } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    const [observes, execs] = [driver.observes, driver.execs];
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    assert.deepEqual([driver.observes - observes, driver.execs - execs], [0, 1]);
    await domain.pauseSandbox(sandboxId);
    const events = await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    assert.deepEqual(
      events.map((e) => e.type),
      ["stdout", "completed"],
    );
    assert.equal(driver.resumes, 1);
    assert.equal(driver.execs - execs, 2);
  });

  test("an exec on a sandbox the driver holds paused: its resume starts before the record is read, one read, one resume", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    await domain.pauseSandbox(sandboxId);
    await new Promise((r) => setTimeout(r, 20));
    // The record's reads are held until the test lets them go.
    const get = store.get.bind(store);
    let reads = 0;
    let letGo = () => {};
    const held = new Promise<void>((r) => {
      letGo = r;
    });
    store.get = async (id) => {
      reads++;
      await held;
      return get(id);
    };
    const [observes, execs] = [driver.observes, driver.execs];
    const exec = drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    const until = Date.now() + 2000;
    while (driver.resumes === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    // A released local sandbox's resume is a new start (~40 ms): it must not wait behind the read.
    assert.equal(driver.resumes, 1, "the driver's resume started while the record was being read");
    assert.equal(reads, 1);
    letGo();
    const events = await exec;
    assert.deepEqual(
      events.map((e) => e.type),
      ["stdout", "completed"],
    );
    await domain.settle();
    assert.deepEqual([reads, driver.resumes, driver.execs - execs, driver.observes - observes], [1, 1, 1, 1]);
    const record = await get(sandboxId);
    assert.equal(record?.status, "READY");
    assert.ok((record?.pausedMs ?? 0) >= 15, `paused time counted (${record?.pausedMs} ms)`);
    assert.equal(record?.pausedAt, null);
  });

  test("a sandbox failing while an exec waits gives FAILED_PRECONDITION; the failure reason is stored", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    setTimeout(() => driver.set(sandboxId, { phase: "failed", reason: "oom" }), 30);
    await code(
      drain(domain.execCommand({ sandboxId, command: "/bin/true" })),
      Code.FailedPrecondition,
      ComputeReason.sandboxNotRunnable,
    );
    await domain.settle();
    const r = await store.get(sandboxId);
    assert.equal(r?.status, "FAILED");
    assert.equal(r?.failureReason, "oom");
    // FAILED is final except for DESTROYED: a late "ready" does not resurrect it.
    driver.set(sandboxId, { phase: "ready" });
    await domain.settle();
    assert.equal((await store.get(sandboxId))?.status, "FAILED");
    const destroyed = await domain.destroySandbox(sandboxId);
    assert.equal(destroyed.usage.cpuMs, 42);
    assert.equal((await store.get(sandboxId))?.status, "DESTROYED");
  });

  test("the exec timeout stops the command and reports exit 124, not cancelled", async () => {
    const { domain, driver } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    const events = await drain(domain.execCommand({ sandboxId, command: "/bin/sleep", timeoutMs: 50 }));
    const last = events.at(-1);
    assert.ok(last?.type === "completed");
    assert.equal(last.exitCode, 124);
    assert.equal(last.cancelled, false);
    assert.ok(events.some((e) => e.type === "stderr" && new TextDecoder().decode(e.data).includes("timed out")));
  });

  test("exec defaults working_dir to mount_path and resolves a relative one against it", async () => {
    const { domain, driver } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox({ ...ids(), workspace: { mountPath: "/home/w" } });
    driver.set(sandboxId, { phase: "ready" });
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    assert.equal(driver.lastExec?.workingDir, "/home/w");
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", workingDir: "sub", signal: AbortSignal.abort() }));
    assert.equal(driver.lastExec?.workingDir, "/home/w/sub");
  });

  test("an exec on a sandbox the driver has READY reads no record; once the driver says otherwise the record decides", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox({ ...ids(), workspace: { mountPath: "/home/w" } });
    driver.set(sandboxId, { phase: "ready" });
    await domain.settle();
    let reads = 0;
    const get = store.get.bind(store);
    store.get = (id: string) => {
      reads++;
      return get(id);
    };
    await drain(domain.execCommand({ sandboxId, command: "/bin/x", signal: AbortSignal.abort() }));
    assert.equal(reads, 0);
    assert.equal(driver.lastExec?.workingDir, "/home/w");
    driver.set(sandboxId, { phase: "failed", reason: "oom" });
    await code(
      drain(domain.execCommand({ sandboxId, command: "/bin/x" })),
      Code.FailedPrecondition,
      ComputeReason.sandboxNotRunnable,
    );
    assert.ok(reads > 0);
    await domain.destroySandbox(sandboxId);
    driver.set(sandboxId, { phase: "ready" }); // a driver that still said READY after destroy would not be believed
    await code(drain(domain.execCommand({ sandboxId, command: "/bin/x" })), Code.FailedPrecondition);
  });

  test("validation: INVALID_ARGUMENT for bad ids, empty command, bad env, negative offsets; NOT_FOUND for unknown ids", async () => {
    const { domain, driver } = setup();
    await domain.start();
    await code(domain.createSandbox({ tenantId: "", sessionId: randomUUID() }), Code.InvalidArgument);
    await code(domain.createSandbox({ tenantId: randomUUID(), sessionId: "x" }), Code.InvalidArgument);
    await code(domain.createSandbox({ ...ids(), limits: { maxRuntimeMs: -5 } }), Code.InvalidArgument);
    await code(domain.createSandbox({ ...ids(), limits: { cpuMillis: 1 } }), Code.InvalidArgument);
    await code(domain.describeSandbox("not-a-uuid"), Code.InvalidArgument);
    await code(domain.describeSandbox(randomUUID()), Code.NotFound, ComputeReason.sandboxNotFound);
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    await code(drain(domain.execCommand({ sandboxId, command: "" })), Code.InvalidArgument);
    await code(drain(domain.execCommand({ sandboxId: "nope", command: "/bin/true" })), Code.InvalidArgument);
    await code(
      drain(domain.execCommand({ sandboxId, command: "/bin/true", env: { "A=B": "x" } })),
      Code.InvalidArgument,
    );
    await code(domain.readFile(sandboxId, "", 0, 0), Code.InvalidArgument);
    await code(domain.readFile(sandboxId, "a", -1, 0), Code.InvalidArgument);
    await code(domain.readFile(sandboxId, "a", 0, -1), Code.InvalidArgument);
    await code(domain.readFile(sandboxId, "../a", 0, 0), Code.InvalidArgument, ComputeReason.pathEscapes);
    await code(domain.writeFile(sandboxId, "/workspace", new Uint8Array(1)), Code.InvalidArgument);
    await code(
      domain.writeFile(sandboxId, "a", new Uint8Array(16 * 1024 * 1024 + 1)),
      Code.InvalidArgument,
      ComputeReason.payloadTooLarge,
    );
    await code(domain.writeFile(sandboxId, "a", new Uint8Array(1), false, 0o100000), Code.InvalidArgument);
    assert.equal(await domain.writeFile(sandboxId, "a", new Uint8Array(16 * 1024 * 1024)), 16 * 1024 * 1024);
  });

  test("workspace.size: a capacity string between 32Mi and 1Ti, else INVALID_ARGUMENT naming the field, and nothing is created", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    for (const size of [
      "not-a-size",
      "5GB",
      "5 Gi",
      "1e3",
      "-1Gi",
      "0",
      "16Mi",
      "1.5Ti",
      "9Ei",
      `${"9".repeat(40)}Gi`,
    ]) {
      await assert.rejects(domain.createSandbox({ ...ids(), workspace: { size } }), (e: unknown) => {
        assert.ok(e instanceof PlatformError, String(e));
        assert.equal(e.code, Code.InvalidArgument, `${size}: ${e.message}`);
        assert.match(e.message, /workspace\.size/);
        return true;
      });
    }
    assert.equal(driver.specs.size, 0);
    assert.equal((await store.listLive()).length, 0);
    for (const size of ["32Mi", "64Mi", "1.5Gi", "5Gi", "1Ti", "100M"]) {
      const { sandboxId } = await domain.createSandbox({ ...ids(), workspace: { size } });
      assert.equal(driver.specs.get(sandboxId)?.workspace.size, size);
    }
    const { sandboxId } = await domain.createSandbox(ids());
    assert.equal(driver.specs.get(sandboxId)?.workspace.size, "1Gi", "the default (PVC_WORKSPACE_SIZE) when unset");
  });

  test("DestroySandbox is idempotent and keeps the lifetime usage; exec after it is FAILED_PRECONDITION", async () => {
    const { domain, driver } = setup();
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    assert.equal((await domain.destroySandbox(sandboxId)).usage.cpuMs, 42);
    assert.equal((await domain.destroySandbox(sandboxId)).usage.cpuMs, 42);
    assert.equal((await domain.describeSandbox(sandboxId)).status, "DESTROYED");
    await code(drain(domain.execCommand({ sandboxId, command: "/bin/true" })), Code.FailedPrecondition);
  });

  test("start() re-attaches live records: surviving ones stay, vanished ones become FAILED (lost)", async () => {
    const { domain, driver, store } = setup();
    await domain.start();
    const a = await domain.createSandbox(ids());
    const b = await domain.createSandbox(ids());
    driver.set(a.sandboxId, { phase: "ready" });
    driver.set(b.sandboxId, { phase: "ready" });
    await domain.settle();
    await domain.stop();
    // A new process: the driver knows only `a` still runs.
    const fresh = new ScriptedDriver();
    fresh.phases.set(a.sandboxId, { phase: "ready" });
    const again = new ComputeDomain({
      driver: fresh,
      store,
      defaults: { image: "i", storageClass: "", workspaceSize: "" },
    });
    await again.start();
    assert.equal((await store.get(a.sandboxId))?.status, "READY");
    assert.equal((await store.get(b.sandboxId))?.status, "FAILED");
    assert.equal((await store.get(b.sandboxId))?.failureReason, "lost");
  });
});

/** Polls fn until it returns true (deadline 10 s: a loaded machine). */
async function until(fn: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await fn())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("ComputeDomain: pause and resume", () => {
  function pausing(idlePauseMs: number) {
    const driver = new ScriptedDriver();
    const store = new MemorySandboxStore();
    const domain = new ComputeDomain({
      driver,
      store,
      defaults: { image: "img", storageClass: "sc", workspaceSize: "1Gi" },
      idlePauseMs,
    });
    return { driver, store, domain };
  }
  const readySandbox = async (d: ReturnType<typeof pausing>, idleTimeoutMs?: number) => {
    await d.domain.start();
    const { sandboxId } = await d.domain.createSandbox({ ...ids(), idleTimeoutMs });
    d.driver.set(sandboxId, { phase: "ready" });
    await d.domain.settle();
    return sandboxId;
  };

  test("an idle sandbox is paused after its idle period; status stays readable; exec and file calls resume it", async () => {
    const d = pausing(60_000);
    const sandboxId = await readySandbox(d, 50); // its own period beats the service's
    await until(async () => (await d.domain.describeSandbox(sandboxId)).status === "PAUSED", "the idle pause");
    assert.equal(d.driver.pauses, 1);
    assert.ok((await d.store.get(sandboxId))?.pausedAt instanceof Date);
    const began = Date.now();
    await d.domain.writeFile(sandboxId, "a", new Uint8Array(1));
    const status = (await d.domain.describeSandbox(sandboxId)).status;
    // READY, unless the 50 ms idle period has passed again since the call began (a loaded machine).
    assert.ok(status === "READY" || Date.now() - began >= 50, `${status} ${Date.now() - began} ms after the call`);
    assert.equal(d.driver.resumes, 1);
    // Idle again: paused again; an exec resumes it and keeps it from pausing while it runs.
    await until(async () => (await d.domain.describeSandbox(sandboxId)).status === "PAUSED", "the second idle pause");
    const controller = new AbortController();
    const it = d.domain
      .execCommand({ sandboxId, command: "/bin/sleep", signal: controller.signal })
      [Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.type, "stdout");
    assert.equal(d.driver.resumes, 2);
    await new Promise((r) => setTimeout(r, 200)); // four idle periods
    assert.equal((await d.domain.describeSandbox(sandboxId)).status, "READY", "not paused under a running exec");
    await code(d.domain.pauseSandbox(sandboxId), Code.FailedPrecondition, ComputeReason.sandboxBusy);
    controller.abort();
    while (!(await it.next()).done) {}
    await until(
      async () => (await d.domain.describeSandbox(sandboxId)).status === "PAUSED",
      "the pause after the exec",
    );
    const record = await d.store.get(sandboxId);
    assert.ok((record?.pausedMs ?? 0) > 0, "the ended pauses are recorded for max_runtime");
    await d.domain.stop();
  });

  test("the status read right after a call that resumed the sandbox is READY, however slow the resume's record write", async () => {
    // The resume lets its caller go on before the row says READY; a describe then must wait for that write.
    let releaseWrite!: () => void;
    const written = new Promise<void>((r) => {
      releaseWrite = r;
    });
    class SlowResumeStore extends MemorySandboxStore {
      override async transition(...args: Parameters<MemorySandboxStore["transition"]>) {
        if (args[1] === "READY" && args[2]?.pausedMs !== undefined) await written;
        return super.transition(...args);
      }
    }
    const driver = new ScriptedDriver();
    const store = new SlowResumeStore();
    const domain = new ComputeDomain({
      driver,
      store,
      defaults: { image: "img", storageClass: "sc", workspaceSize: "1Gi" },
      idlePauseMs: 0,
    });
    await domain.start();
    const { sandboxId } = await domain.createSandbox(ids());
    driver.set(sandboxId, { phase: "ready" });
    await domain.settle();
    assert.equal(await domain.pauseSandbox(sandboxId), "PAUSED");
    await domain.writeFile(sandboxId, "a", new Uint8Array(1));
    const described = domain.describeSandbox(sandboxId);
    setTimeout(releaseWrite, 50);
    assert.equal((await described).status, "READY");
    assert.equal(driver.resumes, 1);
    await domain.stop();
  });

  test("the service's idle period applies when CreateSandbox sets none; 0 disables idle pauses", async () => {
    const on = pausing(50);
    const a = await readySandbox(on);
    await until(async () => (await on.domain.describeSandbox(a)).status === "PAUSED", "the default idle pause");
    await on.domain.stop();
    const off = pausing(0);
    const b = await readySandbox(off);
    await new Promise((r) => setTimeout(r, 150));
    assert.equal((await off.domain.describeSandbox(b)).status, "READY");
    assert.equal(off.driver.pauses, 0);
    await code(off.domain.createSandbox({ ...ids(), idleTimeoutMs: -1 }), Code.InvalidArgument);
    await off.domain.stop();
  });

  test("PauseSandbox and ResumeSandbox: idempotent; FAILED and DESTROYED are FAILED_PRECONDITION", async () => {
    const d = pausing(0);
    const sandboxId = await readySandbox(d);
    assert.equal(await d.domain.pauseSandbox(sandboxId), "PAUSED");
    assert.equal(await d.domain.pauseSandbox(sandboxId), "PAUSED");
    assert.equal(d.driver.pauses, 1);
    assert.equal(await d.domain.resumeSandbox(sandboxId), "READY");
    assert.equal(await d.domain.resumeSandbox(sandboxId), "READY");
    assert.equal(d.driver.resumes, 1);
    await d.domain.destroySandbox(sandboxId);
    await code(d.domain.pauseSandbox(sandboxId), Code.FailedPrecondition, ComputeReason.sandboxNotRunnable);
    await code(d.domain.resumeSandbox(sandboxId), Code.FailedPrecondition, ComputeReason.sandboxNotRunnable);
    await code(d.domain.pauseSandbox(randomUUID()), Code.NotFound);
    await code(d.domain.resumeSandbox("nope"), Code.InvalidArgument);
    await d.domain.stop();
  });

  test("two resumes at once resume once; a resume racing a destroy has one outcome", async () => {
    const d = pausing(0);
    const sandboxId = await readySandbox(d);
    await d.domain.pauseSandbox(sandboxId);
    const [r1, r2] = await Promise.all([d.domain.resumeSandbox(sandboxId), d.domain.readFile(sandboxId, "x")]);
    assert.equal(r1, "READY");
    assert.ok(r2.eof);
    assert.equal(d.driver.resumes, 1);
    // Resume first: the destroy waits for it, then destroys.
    await d.domain.pauseSandbox(sandboxId);
    let open!: () => void;
    d.driver.resumeGate = new Promise<void>((r) => {
      open = r;
    });
    const resumed = d.domain.resumeSandbox(sandboxId);
    await new Promise((r) => setTimeout(r, 20));
    const destroyed = d.domain.destroySandbox(sandboxId);
    open();
    assert.equal(await resumed, "READY");
    assert.equal((await destroyed).usage.cpuMs, 42);
    assert.equal((await d.domain.describeSandbox(sandboxId)).status, "DESTROYED");
    // Destroy first: the resume finds it DESTROYED.
    const other = await readySandbox(d);
    await d.domain.pauseSandbox(other);
    const gone = d.domain.destroySandbox(other);
    const late = d.domain.resumeSandbox(other);
    await gone;
    await code(late, Code.FailedPrecondition, ComputeReason.sandboxNotRunnable);
    await d.domain.stop();
  });

  test("a PAUSED sandbox stays PAUSED across a restart and its pause reaches the driver's recover", async () => {
    const d = pausing(0);
    const sandboxId = await readySandbox(d);
    await d.domain.pauseSandbox(sandboxId);
    await d.domain.stop();
    const fresh = new ScriptedDriver();
    fresh.phases.set(sandboxId, { phase: "paused" });
    const seen: SandboxSpec[] = [];
    const recover = fresh.recover.bind(fresh);
    fresh.recover = async (spec) => {
      seen.push(spec);
      return recover(spec);
    };
    const again = new ComputeDomain({
      driver: fresh,
      store: d.store,
      defaults: { image: "i", storageClass: "", workspaceSize: "" },
    });
    await again.start();
    assert.ok(seen[0]?.pausedAt instanceof Date);
    assert.equal((await again.describeSandbox(sandboxId)).status, "PAUSED");
    await again.writeFile(sandboxId, "b", new Uint8Array(1));
    assert.equal((await again.describeSandbox(sandboxId)).status, "READY");
    await again.stop();
  });
});
