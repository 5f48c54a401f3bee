// ComputeService end to end over gRPC (real server on an ephemeral port with
// mutual TLS from a throw-away PKI, called as the agents service; the local
// driver, the kysely store on PostgreSQL and on PGlite).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { Code, ComputeReason, InternalReason } from "@platform/errors";
import {
  ComputeService,
  type ExecEvent,
  ExecCommandRequestSchema,
  SandboxStatus,
} from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, fromConnectError, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import type { ComputeConfig } from "./config.ts";
import { testComputeConfig } from "./testing/config.ts";
import { DELETE_AFTER_KEY } from "./driver.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
import { createComputeTestDatabase } from "./testing/database.ts";

const logger = pino({ level: "silent" });
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

let database: Database<unknown>;
let dataDir: string;
let cgroupPrefix: string;
let app: ComputeApp;
let client: Client<typeof ComputeService>;
let pki: TestPki;
let url: string;
/** A client of the compute port with `caller`'s certificate. */
const clientAs = (caller: string) =>
  createClient(
    ComputeService,
    createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env(caller)), expectServer: "compute" }),
  );

function config(): ComputeConfig {
  return testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" });
}

/** keep: sandboxes outlive the service's stop (production's default) instead of ending with it. */
async function startApp(keep = false): Promise<void> {
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix,
    logger,
    dieWithService: !keep,
  });
  app = await createComputeApp(config(), logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  ({ url } = await app.server.listen());
  client = clientAs("agents");
}

async function expectCode(p: Promise<unknown>, code: Code, reason?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    const pe = fromConnectError(err);
    assert.equal(pe.code, code, `got ${Code[pe.code]} (${pe.reason}): ${pe.message}`);
    if (reason) assert.equal(pe.reason, reason);
    return true;
  });
}

async function newSandbox(limits?: { maxRuntimeMs?: number; memoryBytes?: number }): Promise<string> {
  const res = await client.createSandbox({
    tenantId: randomUUID(),
    sessionId: randomUUID(),
    limits: limits
      ? {
          maxRuntime: limits.maxRuntimeMs ? durationFromMs(limits.maxRuntimeMs) : undefined,
          memoryBytes: BigInt(limits.memoryBytes ?? 0),
        }
      : undefined,
  });
  return res.sandboxId;
}

async function waitStatus(id: string, status: SandboxStatus, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const d = await client.describeSandbox({ sandboxId: id });
    if (d.status === status) return;
    if (Date.now() > until) assert.fail(`status ${SandboxStatus[d.status]}, wanted ${SandboxStatus[status]}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function run(
  id: string,
  command: string,
  args: string[] = [],
  extra: Partial<{ env: Record<string, string>; workingDir: string }> = {},
) {
  let stdout = "";
  let stderr = "";
  const events: ExecEvent[] = [];
  for await (const e of client.execCommand({ sandboxId: id, command, args, ...extra })) {
    events.push(e);
    if (e.event.case === "stdout") stdout += dec(e.event.value.data);
    if (e.event.case === "stderr") stderr += dec(e.event.value.data);
  }
  const last = events.at(-1);
  assert.equal(last?.event.case, "completed");
  assert.ok(
    events.every((e) => e.emittedAt),
    "every event carries emitted_at",
  );
  return {
    stdout,
    stderr,
    completed: last.event.value as Extract<ExecEvent["event"], { case: "completed" }>["value"],
    events,
  };
}

before(async () => {
  database = await createComputeTestDatabase();
  pki = await makeTestPki(["compute", "agents", "identity", "runtime-router", "runtime-worker", "operator"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-svc-"));
  fs.chmodSync(dataDir, 0o711);
  cgroupPrefix = `platform-compute-svc-${process.pid}`;
  await startApp();
});

after(async () => {
  await app?.close();
  // Sandboxes left running by a failed test: kill them through a fresh driver.
  const cleaner = new LocalDriver({ dataDir, cgroupPrefix, logger, dieWithService: true });
  for (const r of await new KyselySandboxStore(database).listLive()) {
    await cleaner.recover({ ...specFromRecord(r) }).catch(() => {});
    await cleaner.destroy(r.id).catch(() => {});
  }
  await cleaner.close();
  await database.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  pki.remove();
});

describe("the compute port (mutual TLS)", () => {
  test("is https; only the agents service may call ComputeService, before any sandbox is touched", async () => {
    assert.match(url, /^https:/);
    const tenantId = randomUUID();
    for (const caller of ["operator", "identity", "runtime-router", "runtime-worker", "compute"]) {
      await expectCode(
        clientAs(caller).createSandbox({ tenantId, sessionId: randomUUID() }),
        Code.PermissionDenied,
        InternalReason.callerNotAllowed,
      );
      await expectCode(
        clientAs(caller).listFiles({ sandboxId: randomUUID(), path: "/" }),
        Code.PermissionDenied,
        InternalReason.callerNotAllowed,
      );
    }
    assert.deepEqual(
      (await new KyselySandboxStore(database).listLive()).filter((r) => r.tenantId === tenantId),
      [],
    );
  });

  test("a plaintext client, or one without a certificate, gets no answer", async () => {
    const plain = createClient(ComputeService, createGrpcTransport({ baseUrl: url.replace("https:", "http:") }));
    await assert.rejects(plain.describeSandbox({ sandboxId: randomUUID() }));
    const pem = pki.pem("agents");
    const noCert = createClient(
      ComputeService,
      createGrpcTransport({ baseUrl: url, sessionManager: new Http2SessionManager(url, undefined, { ca: pem.ca }) }),
    );
    await assert.rejects(noCert.describeSandbox({ sandboxId: randomUUID() }), /certificate required/);
  });
});

function specFromRecord(r: Awaited<ReturnType<KyselySandboxStore["get"]>> & object) {
  return {
    sandboxId: r.id,
    tenantId: r.tenantId,
    sessionId: r.sessionId,
    image: r.image,
    workspace: { storageClass: r.storageClass, size: r.workspaceSize, mountPath: r.mountPath },
    limits: { cpuMillis: r.cpuMillis, memoryBytes: r.memoryBytes, maxRuntimeMs: r.maxRuntimeMs },
    createdAt: r.createdAt,
  };
}

describe("CreateSandbox", () => {
  test("returns STARTING at once, READY follows asynchronously; defaults come from SANDBOX_IMAGE, PVC_* and the spec", async () => {
    const tenantId = randomUUID();
    const sessionId = randomUUID();
    const res = await client.createSandbox({ tenantId, sessionId });
    assert.equal(res.status, SandboxStatus.STARTING);
    assert.match(res.sandboxId, /^[0-9a-f-]{36}$/);
    assert.ok(res.createdAt);
    await waitStatus(res.sandboxId, SandboxStatus.READY);
    const record = await new KyselySandboxStore(database).get(res.sandboxId);
    assert.ok(record);
    assert.equal(record.image, "registry.test/sandbox:v1");
    assert.equal(record.storageClass, "fast-ssd");
    assert.equal(record.workspaceSize, "7Gi");
    assert.equal(record.mountPath, "/workspace");
    assert.equal(record.cpuMillis, 1000);
    assert.equal(record.memoryBytes, 1024 ** 3);
    assert.equal(record.maxRuntimeMs, 15 * 60_000);
    assert.equal(record.tenantId, tenantId);
    await client.destroySandbox({ sandboxId: res.sandboxId });
  });

  test("explicit image, workspace and limits are kept", async () => {
    const res = await client.createSandbox({
      tenantId: randomUUID(),
      sessionId: randomUUID(),
      image: "custom:1",
      workspace: { mountPath: "/home/work/", storageClass: "slow", size: "1Gi" },
      limits: { cpuMillis: 250, memoryBytes: 300n * 1024n * 1024n, maxRuntime: durationFromMs(60_000) },
    });
    const record = await new KyselySandboxStore(database).get(res.sandboxId);
    assert.equal(record?.image, "custom:1");
    assert.equal(record?.mountPath, "/home/work");
    assert.equal(record?.cpuMillis, 250);
    assert.equal(record?.memoryBytes, 300 * 1024 * 1024);
    assert.equal(record?.maxRuntimeMs, 60_000);
    await waitStatus(res.sandboxId, SandboxStatus.READY);
    const r = await run(res.sandboxId, "/bin/pwd");
    assert.equal(r.stdout, "/home/work\n");
    await client.destroySandbox({ sandboxId: res.sandboxId });
  });

  test("INVALID_ARGUMENT on empty or malformed tenant_id / session_id and bad limits", async () => {
    await expectCode(
      client.createSandbox({ tenantId: "", sessionId: randomUUID() }),
      Code.InvalidArgument,
      ComputeReason.invalidArgument,
    );
    await expectCode(client.createSandbox({ tenantId: randomUUID(), sessionId: "" }), Code.InvalidArgument);
    await expectCode(client.createSandbox({ tenantId: "not-a-uuid", sessionId: randomUUID() }), Code.InvalidArgument);
    await expectCode(
      client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID(), workspace: { mountPath: "relative" } }),
      Code.InvalidArgument,
    );
    await expectCode(
      client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID(), workspace: { mountPath: "/usr/x" } }),
      Code.InvalidArgument,
    );
    await expectCode(
      client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID(), limits: { memoryBytes: 1024n } }),
      Code.InvalidArgument,
    );
  });
});

describe("Describe, Destroy and usage", () => {
  test("DescribeSandbox: uptime grows, usage is cumulative; DestroySandbox: lifetime usage, DESTROYED, soft-delete marker", async () => {
    const id = await newSandbox();
    await waitStatus(id, SandboxStatus.READY);
    const d1 = await client.describeSandbox({ sandboxId: id });
    const r = await run(id, "/bin/sh", ["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo ok"]);
    assert.equal(r.stdout, "ok\n");
    assert.ok(r.completed.usage && r.completed.usage.cpuMs > 0n, "exec usage cpu_ms > 0");
    assert.ok(r.completed.wallTime);
    const d2 = await client.describeSandbox({ sandboxId: id });
    assert.equal(d2.sandboxId, id);
    assert.ok(d2.currentUptime && d1.currentUptime);
    const ms = (d: typeof d2.currentUptime) => Number(d?.seconds ?? 0) * 1000 + (d?.nanos ?? 0) / 1e6;
    assert.ok(ms(d2.currentUptime) > ms(d1.currentUptime));
    assert.ok((d2.currentUsage?.cpuMs ?? 0n) >= r.completed.usage.cpuMs);
    assert.ok((d2.currentUsage?.memoryPeakBytes ?? 0n) > 0n);
    assert.equal(d2.currentUsage?.networkEgressBytes, 0n);

    const destroyed = await client.destroySandbox({ sandboxId: id });
    assert.equal(destroyed.sandboxId, id);
    assert.ok((destroyed.totalUsage?.cpuMs ?? 0n) >= r.completed.usage.cpuMs);
    const d3 = await client.describeSandbox({ sandboxId: id });
    assert.equal(d3.status, SandboxStatus.DESTROYED);
    assert.equal(d3.currentUsage?.cpuMs, destroyed.totalUsage?.cpuMs);
    const again = await client.destroySandbox({ sandboxId: id });
    assert.equal(again.totalUsage?.cpuMs, destroyed.totalUsage?.cpuMs);

    const marker = JSON.parse(fs.readFileSync(join(dataDir, "sandboxes", id, "annotations.json"), "utf8"));
    const deleteAfter = Date.parse(marker[DELETE_AFTER_KEY]);
    assert.ok(Math.abs(deleteAfter - (Date.now() + 24 * 3600_000)) < 60_000);
    const record = await new KyselySandboxStore(database).get(id);
    const wsDir = join(dataDir, "workspaces", `${record?.tenantId}_${record?.sessionId}`);
    assert.ok(fs.existsSync(join(wsDir, "workspace.img")), "the session's workspace (its image) kept during the grace");
    assert.ok(JSON.parse(fs.readFileSync(join(wsDir, "annotations.json"), "utf8"))[DELETE_AFTER_KEY], "and marked");

    await expectCode(run(id, "/bin/true"), Code.FailedPrecondition, ComputeReason.sandboxNotRunnable);
    await expectCode(client.readFile({ sandboxId: id, path: "x" }), Code.FailedPrecondition);
  });

  test("unknown and malformed sandbox ids", async () => {
    await expectCode(client.describeSandbox({ sandboxId: "nope" }), Code.InvalidArgument);
    await expectCode(client.destroySandbox({ sandboxId: "" }), Code.InvalidArgument);
    await expectCode(client.describeSandbox({ sandboxId: randomUUID() }), Code.NotFound);
    await expectCode(run("bad", "/bin/true"), Code.InvalidArgument);
    await expectCode(client.readFile({ sandboxId: "bad", path: "a" }), Code.InvalidArgument);
  });

  test("a sandbox past max_runtime becomes FAILED and then rejects exec with FAILED_PRECONDITION", async () => {
    // Long enough to be seen READY on a loaded machine (1.2 s was not, at load 20).
    const id = await newSandbox({ maxRuntimeMs: 4000 });
    await waitStatus(id, SandboxStatus.READY);
    await waitStatus(id, SandboxStatus.FAILED);
    const record = await new KyselySandboxStore(database).get(id);
    assert.equal(record?.failureReason, "deadline");
    await expectCode(run(id, "/bin/true"), Code.FailedPrecondition, ComputeReason.sandboxNotRunnable);
    const destroyed = await client.destroySandbox({ sandboxId: id });
    assert.ok(destroyed.totalUsage);
    assert.equal((await client.describeSandbox({ sandboxId: id })).status, SandboxStatus.DESTROYED);
  });
});

describe("ExecCommand", () => {
  let id: string;
  before(async () => {
    id = await newSandbox();
  });
  after(async () => {
    await client.destroySandbox({ sandboxId: id });
  });

  test("waits for READY when called right after CreateSandbox", async () => {
    const fresh = await newSandbox();
    const r = await run(fresh, "/bin/echo", ["hi"]);
    assert.equal(r.stdout, "hi\n");
    await client.destroySandbox({ sandboxId: fresh });
  });

  test("streams stdout and stderr; args, env and working_dir honoured; last event completed with exit code, wall time, usage", async () => {
    await client.writeFile({ sandboxId: id, path: "wd/x", data: enc("") });
    const r = await run(id, "/bin/sh", ["-c", 'echo "$1 $FOO $(pwd)"; echo oops >&2; exit 7', "sh", "an-arg"], {
      env: { FOO: "bar" },
      workingDir: "wd",
    });
    assert.equal(r.stdout, "an-arg bar /workspace/wd\n");
    assert.equal(r.stderr, "oops\n");
    assert.equal(r.completed.exitCode, 7);
    assert.equal(r.completed.cancelled, false);
    assert.ok(r.completed.wallTime);
    assert.ok(r.completed.usage);
  });

  test("the first chunk arrives while the command is still running", async () => {
    const gate = `gate-${randomUUID()}`;
    let sawFirst = false;
    let out = "";
    for await (const e of client.execCommand({
      sandboxId: id,
      command: "/bin/sh",
      args: ["-c", `echo first; while [ ! -e ${gate} ]; do sleep 0.02; done; echo second`],
    })) {
      if (e.event.case === "stdout") {
        out += dec(e.event.value.data);
        if (!sawFirst) {
          sawFirst = true;
          // Only now may the command finish: the chunk provably arrived before it ended.
          await client.writeFile({ sandboxId: id, path: gate, data: enc("") });
        }
      }
    }
    assert.ok(sawFirst);
    assert.equal(out, "first\nsecond\n");
  });

  test("INVALID_ARGUMENT on an empty command", async () => {
    await expectCode(run(id, ""), Code.InvalidArgument);
  });

  test("a timeout stops the command: exit 124, not cancelled", async () => {
    const events: ExecEvent[] = [];
    const started = Date.now();
    for await (const e of client.execCommand(
      create(ExecCommandRequestSchema, {
        sandboxId: id,
        command: "/bin/sleep",
        args: ["30"],
        timeout: durationFromMs(300),
      }),
    )) {
      events.push(e);
    }
    const last = events.at(-1)?.event;
    assert.equal(last?.case, "completed");
    assert.equal(last.value.exitCode, 124);
    assert.equal(last.value.cancelled, false);
    assert.ok(Date.now() - started < 10_000);
  });

  test("client cancel kills the whole tree (no orphan survives)", async () => {
    const controller = new AbortController();
    const tag = `c${randomUUID().slice(0, 6)}`;
    await assert.rejects(async () => {
      for await (const e of client.execCommand(
        { sandboxId: id, command: "/bin/sh", args: ["-c", `sleep 777 & (sleep 778 &) ; echo ${tag}; wait`] },
        { signal: controller.signal },
      )) {
        if (e.event.case === "stdout" && dec(e.event.value.data).includes(tag)) controller.abort();
      }
    });
    // The server finishes the cancel (SIGTERM, grace, SIGKILL) on its own; poll until nothing is left.
    const until = Date.now() + 10_000;
    let ps = "";
    do {
      await new Promise((r) => setTimeout(r, 100));
      ps = (await run(id, "/bin/sh", ["-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"])).stdout;
    } while (/sleep 77[78]/.test(ps) && Date.now() < until);
    assert.doesNotMatch(ps, /sleep 77[78]/);
  });

  test("a client cancel before any output releases the sandbox (a pause is taken again)", async () => {
    const controller = new AbortController();
    const tag = `7777.${Math.floor(Math.random() * 1e6)}`;
    const stream = (async () => {
      for await (const _ of client.execCommand(
        { sandboxId: id, command: "/bin/sleep", args: [tag] },
        { signal: controller.signal },
      )) {
        // A silent command: nothing arrives before the cancel.
      }
    })();
    // Cancel once the command runs, so the cancel meets a started exec, not a start.
    const started = Date.now() + 10_000;
    while (
      !(await run(id, "/bin/sh", ["-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"])).stdout.includes(tag)
    ) {
      assert.ok(Date.now() < started, "the command never started");
      await new Promise((r) => setTimeout(r, 50));
    }
    controller.abort();
    await assert.rejects(stream);
    // The exec's hold ends with the cancel: a pause (refused while an exec runs) is taken within seconds.
    const until = Date.now() + 10_000;
    for (;;) {
      try {
        await client.pauseSandbox({ sandboxId: id });
        break;
      } catch (err) {
        if (Date.now() > until) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await client.resumeSandbox({ sandboxId: id });
  });

  test("cancel through the domain emits completed(cancelled, -1) before the stream closes", async () => {
    const controller = new AbortController();
    const events: string[] = [];
    for await (const e of app.domain.execCommand({
      sandboxId: id,
      command: "/bin/sh",
      args: ["-c", "echo go; sleep 100"],
      signal: controller.signal,
    })) {
      events.push(e.type === "completed" ? `completed:${e.cancelled}:${e.exitCode}` : e.type);
      if (e.type === "stdout") controller.abort();
    }
    assert.deepEqual(events, ["stdout", "completed:true:-1"]);
  });
});

describe("Files over gRPC", () => {
  let id: string;
  before(async () => {
    id = await newSandbox();
    await waitStatus(id, SandboxStatus.READY);
  });
  after(async () => {
    await client.destroySandbox({ sandboxId: id });
  });

  test("WriteFile / ReadFile / ListFiles round trip with offsets, append, mode and FileEntry fields", async () => {
    const w = await client.writeFile({
      sandboxId: id,
      path: "/workspace/dir/a.txt",
      data: enc("0123456789"),
      mode: 0o600,
    });
    assert.equal(w.bytesWritten, 10n);
    await client.writeFile({ sandboxId: id, path: "dir/a.txt", data: enc("AB"), append: true, mode: 0o777 });
    const r = await client.readFile({ sandboxId: id, path: "./dir//a.txt", offset: 8n, maxBytes: 3n });
    assert.equal(dec(r.data), "89A");
    assert.equal(r.totalSize, 12n);
    assert.equal(r.eof, false);
    const rest = await client.readFile({ sandboxId: id, path: "dir/a.txt", offset: 8n });
    assert.equal(dec(rest.data), "89AB");
    assert.equal(rest.eof, true);
    const list = await client.listFiles({ sandboxId: id, path: "dir" });
    assert.equal(list.entries.length, 1);
    const [entry] = list.entries;
    assert.equal(entry?.path, "a.txt");
    assert.equal(entry?.size, 12n);
    assert.equal(entry?.isDir, false);
    assert.equal(entry?.mode, 0o600);
    assert.ok(entry?.modifiedAt && Number(entry.modifiedAt.seconds) > 0);
  });

  test("path rules: `..` after cleaning is INVALID_ARGUMENT; a symlink leaving the mount is PERMISSION_DENIED", async () => {
    await expectCode(
      client.readFile({ sandboxId: id, path: "../etc/passwd" }),
      Code.InvalidArgument,
      ComputeReason.pathEscapes,
    );
    await expectCode(client.writeFile({ sandboxId: id, path: "a/../../x", data: enc("x") }), Code.InvalidArgument);
    await expectCode(client.listFiles({ sandboxId: id, path: "/etc" }), Code.InvalidArgument);
    await run(id, "/bin/ln", ["-s", "/etc", "etc-link"]);
    await expectCode(
      client.readFile({ sandboxId: id, path: "etc-link/hostname" }),
      Code.PermissionDenied,
      ComputeReason.symlinkOutside,
    );
    await expectCode(client.listFiles({ sandboxId: id, path: "etc-link" }), Code.PermissionDenied);
    await expectCode(client.writeFile({ sandboxId: id, path: "etc-link/x", data: enc("x") }), Code.PermissionDenied);
    // `a/../b` cleans to `b`: allowed.
    await client.writeFile({ sandboxId: id, path: "a/../b.txt", data: enc("b") });
    assert.equal(dec((await client.readFile({ sandboxId: id, path: "b.txt" })).data), "b");
  });

  test("16 MiB limits: WriteFile over 16 MiB is rejected; ReadFile caps at 16 MiB with eof=false", async () => {
    const big = new Uint8Array(16 * 1024 * 1024 + 1);
    await expectCode(
      client.writeFile({ sandboxId: id, path: "big", data: big }),
      Code.InvalidArgument,
      ComputeReason.payloadTooLarge,
    );
    await run(id, "/bin/sh", ["-c", "head -c 17000000 /dev/zero > big"]);
    const r = await client.readFile({ sandboxId: id, path: "big", maxBytes: 0n });
    assert.equal(r.data.length, 16 * 1024 * 1024);
    assert.equal(r.totalSize, 17_000_000n);
    assert.equal(r.eof, false);
    const over = await client.readFile({ sandboxId: id, path: "big", maxBytes: 100_000_000n });
    assert.equal(over.data.length, 16 * 1024 * 1024);
  });

  test("ListFiles: recursive, max_entries 0 means 1000, hard cap 10000, truncated", async () => {
    await run(id, "/bin/sh", ["-c", "mkdir -p many/sub && cd many && seq 1 10050 | xargs touch && touch sub/inner"]);
    const def = await client.listFiles({ sandboxId: id, path: "many" });
    assert.equal(def.entries.length, 1000);
    assert.equal(def.truncated, true);
    const capped = await client.listFiles({ sandboxId: id, path: "many", maxEntries: 50_000 });
    assert.equal(capped.entries.length, 10_000);
    assert.equal(capped.truncated, true);
    const sub = await client.listFiles({ sandboxId: id, path: "many/sub", recursive: true });
    assert.deepEqual(
      sub.entries.map((e) => e.path),
      ["inner"],
    );
    await run(id, "/bin/sh", ["-c", "mkdir -p tree/x/y && touch tree/x/y/z tree/top"]);
    const rec = await client.listFiles({ sandboxId: id, path: "tree", recursive: true });
    assert.deepEqual(rec.entries.map((e) => `${e.path}${e.isDir ? "/" : ""}`).sort(), ["top", "x/", "x/y/", "x/y/z"]);
    assert.ok(rec.entries.filter((e) => e.isDir).every((e) => e.size === 0n));
    assert.equal(rec.truncated, false);
  });
});

describe("restart of the compute process", () => {
  test("records survive; a running sandbox is re-attached; one whose processes died becomes FAILED", async () => {
    // Sandboxes that outlive a stop of the service (COMPUTE_KEEP_SANDBOXES_ON_EXIT, on by default).
    await app.close();
    await startApp(true);
    const alive = await newSandbox();
    const doomed = await newSandbox();
    await waitStatus(alive, SandboxStatus.READY);
    await waitStatus(doomed, SandboxStatus.READY);
    await client.writeFile({ sandboxId: alive, path: "kept.txt", data: enc("still here") });
    await app.close();

    // While the service is down, the doomed sandbox's processes die.
    const state = JSON.parse(fs.readFileSync(join(dataDir, "sandboxes", doomed, "state.json"), "utf8"));
    process.kill(state.bwrapPid, "SIGKILL");
    process.kill(state.initPid, "SIGKILL");
    for (let i = 0; i < 100 && fs.existsSync(`/proc/${state.initPid}`); i++)
      await new Promise((r) => setTimeout(r, 20));

    await startApp(true);
    const a = await client.describeSandbox({ sandboxId: alive });
    assert.equal(a.status, SandboxStatus.READY);
    assert.equal(dec((await client.readFile({ sandboxId: alive, path: "kept.txt" })).data), "still here");
    assert.equal((await run(alive, "/bin/cat", ["kept.txt"])).stdout, "still here");
    const d = await client.describeSandbox({ sandboxId: doomed });
    assert.equal(d.status, SandboxStatus.FAILED);
    assert.equal((await new KyselySandboxStore(database).get(doomed))?.failureReason, "lost");
    await client.destroySandbox({ sandboxId: alive });
    await client.destroySandbox({ sandboxId: doomed });
  });
});
