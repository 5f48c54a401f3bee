// Exec input (issue 27) end to end over gRPC: ExecCommand with `stdin` or a
// `terminal`, SendExecInput and ResizeExecTerminal through the real compute
// server (mutual TLS, called as the agents service), the local driver and its
// exec helper, PostgreSQL and PGlite.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { type Client, createClient } from "@connectrpc/connect";
import type { Database } from "@platform/db";
import { Code, ComputeReason } from "@platform/errors";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ComputeService, type ExecCommandRequestSchema } from "@platform/gen/compute/v1/compute_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { createServiceTransport, fromConnectError, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { MAX_INPUT_BUFFERED_BYTES, MAX_INPUT_CHUNK_BYTES } from "./service/exec-input.ts";
import { KyselySandboxStore } from "./store/kysely-sandbox-store.ts";
import { testComputeConfig } from "./testing/config.ts";
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
let sandboxA: string;
let sandboxB: string;

async function expectCode(p: Promise<unknown>, code: Code, reason?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    const pe = fromConnectError(err);
    assert.equal(pe.code, code, `got ${Code[pe.code]} (${pe.reason}): ${pe.message}`);
    if (reason) assert.equal(pe.reason, reason);
    return true;
  });
}

/** A running ExecCommand stream: its output so far, a wait for some text in it, and its end. */
function start(req: MessageInitShape<typeof ExecCommandRequestSchema>) {
  let stdout = "";
  let stderr = "";
  let waiters: (() => void)[] = [];
  const done = (async () => {
    let completed: { exitCode: number; cancelled: boolean } | undefined;
    for await (const e of client.execCommand(req)) {
      if (e.event.case === "stdout") stdout += dec(e.event.value.data);
      if (e.event.case === "stderr") stderr += dec(e.event.value.data);
      if (e.event.case === "completed") completed = e.event.value;
      for (const w of waiters) w();
    }
    assert.ok(completed, "the stream ends with completed");
    return completed;
  })();
  done.catch(() => {});
  return {
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    done,
    async waitFor(text: string | RegExp, timeoutMs = 15_000): Promise<void> {
      const until = Date.now() + timeoutMs;
      const seen = () => (typeof text === "string" ? stdout.includes(text) : text.test(stdout));
      while (!seen()) {
        if (Date.now() > until) assert.fail(`no ${text} in stdout ${JSON.stringify(stdout)} / stderr ${stderr}`);
        await Promise.race([
          new Promise<void>((r) => waiters.push(r)),
          new Promise((r) => setTimeout(r, 200)),
          done.then(
            () => {},
            () => {},
          ),
        ]);
        waiters = [];
        if (!seen()) await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

before(async () => {
  database = await createComputeTestDatabase();
  pki = await makeTestPki(["compute", "agents"]);
  dataDir = fs.mkdtempSync(join(tmpdir(), "compute-input-"));
  fs.chmodSync(dataDir, 0o711);
  cgroupPrefix = `platform-compute-input-${process.pid}`;
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 500,
    pidsMax: 128,
    cgroupPrefix,
    logger,
    dieWithService: true,
  });
  app = await createComputeApp(testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }), logger, {
    driver,
    database,
    internalTls: loadServiceTls(pki.env("compute"), "compute"),
  });
  const { url } = await app.server.listen();
  client = createClient(
    ComputeService,
    createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env("agents")), expectServer: "compute" }),
  );
  // Two organizations' sandboxes.
  sandboxA = (await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() })).sandboxId;
  sandboxB = (await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() })).sandboxId;
});

after(async () => {
  await app?.close();
  const cleaner = new LocalDriver({ dataDir, cgroupPrefix, logger, dieWithService: true });
  for (const r of await new KyselySandboxStore(database).listLive()) {
    await cleaner
      .recover({
        sandboxId: r.id,
        tenantId: r.tenantId,
        sessionId: r.sessionId,
        image: r.image,
        workspace: { storageClass: r.storageClass, size: r.workspaceSize, mountPath: r.mountPath },
        limits: { cpuMillis: r.cpuMillis, memoryBytes: r.memoryBytes, maxRuntimeMs: r.maxRuntimeMs },
        createdAt: r.createdAt,
      })
      .catch(() => {});
    await cleaner.destroy(r.id).catch(() => {});
  }
  await cleaner.close();
  await database.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  pki.remove();
});

describe("ExecCommand stdin and SendExecInput", () => {
  test("cat echoes what is sent, in order; eof ends it with exit 0; input after its end is refused", async () => {
    const execId = randomUUID();
    // Sent right after the stream opens (the sandbox may still be starting): queued, not refused.
    const exec = start({ sandboxId: sandboxA, command: "cat", execId, stdin: true });
    const sendEarly = async () => {
      for (let i = 0; ; i++) {
        try {
          return await client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("first\n") });
        } catch (err) {
          // Until the ExecCommand request has reached the server.
          if (fromConnectError(err).reason !== ComputeReason.execNotFound || i > 100) throw err;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    await sendEarly();
    await exec.waitFor("first\n");
    await client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("second ") });
    await client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("line\n"), eof: true });
    const completed = await exec.done;
    assert.equal(exec.stdout, "first\nsecond line\n");
    assert.equal(completed.exitCode, 0);
    assert.equal(completed.cancelled, false);
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("late\n") }),
      Code.NotFound,
      ComputeReason.execNotFound,
    );
  });

  test("binary input arrives byte for byte (64 KiB chunks, 256 KiB in all)", async () => {
    const execId = randomUUID();
    const exec = start({ sandboxId: sandboxA, command: "sha256sum", execId, stdin: true });
    const data = new Uint8Array(256 * 1024).map((_, i) => (i * 7 + (i >> 9)) & 0xff);
    for (let off = 0; off < data.length; off += MAX_INPUT_CHUNK_BYTES) {
      const chunk = data.subarray(off, off + MAX_INPUT_CHUNK_BYTES);
      const last = off + MAX_INPUT_CHUNK_BYTES >= data.length;
      for (;;) {
        try {
          await client.sendExecInput({ sandboxId: sandboxA, execId, data: chunk, eof: last });
          break;
        } catch (err) {
          if (fromConnectError(err).reason !== ComputeReason.execNotFound) throw err;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    }
    assert.equal((await exec.done).exitCode, 0);
    const { createHash } = await import("node:crypto");
    assert.equal(exec.stdout.split(" ")[0], createHash("sha256").update(data).digest("hex"));
  });

  test("refusals: oversize data, another sandbox's (organization's) exec, after eof, a duplicate exec_id, no exec_id", async () => {
    const execId = randomUUID();
    // It outlives its stdin a while: input after eof meets a running exec.
    const exec = start({ sandboxId: sandboxA, command: "/bin/sh", args: ["-c", "cat; sleep 1"], execId, stdin: true });
    for (let i = 0; ; i++) {
      try {
        await client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("ping\n") });
        break;
      } catch (err) {
        if (fromConnectError(err).reason !== ComputeReason.execNotFound || i > 100) throw err;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    await exec.waitFor("ping\n");
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxA, execId, data: new Uint8Array(MAX_INPUT_CHUNK_BYTES + 1) }),
      Code.InvalidArgument,
      ComputeReason.payloadTooLarge,
    );
    // The same exec named with the other organization's sandbox: not found, nothing delivered.
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxB, execId, data: enc("intruder\n") }),
      Code.NotFound,
      ComputeReason.execNotFound,
    );
    await expectCode(
      client.sendExecInput({ sandboxId: randomUUID(), execId, data: enc("x") }),
      Code.NotFound,
      ComputeReason.sandboxNotFound,
    );
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxA, execId: "not-a-uuid", data: enc("x") }),
      Code.InvalidArgument,
    );
    // A second exec with the id of a running one.
    await expectCode(
      start({ sandboxId: sandboxA, command: "cat", execId, stdin: true }).done,
      Code.AlreadyExists,
      ComputeReason.execIdInUse,
    );
    await expectCode(start({ sandboxId: sandboxA, command: "cat", stdin: true }).done, Code.InvalidArgument);
    await client.sendExecInput({ sandboxId: sandboxA, execId, eof: true });
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("more") }),
      Code.FailedPrecondition,
      ComputeReason.stdinClosed,
    );
    assert.equal((await exec.done).exitCode, 0);
    assert.equal(exec.stdout, "ping\n");
  });

  test("without stdin the command reads /dev/null, and the exec takes no input", async () => {
    const execId = randomUUID();
    const exec = start({ sandboxId: sandboxA, command: "/bin/sh", args: ["-c", "cat; echo end"], execId });
    const completed = await exec.done;
    assert.equal(exec.stdout, "end\n");
    assert.equal(completed.exitCode, 0);
    await expectCode(
      client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("x") }),
      Code.NotFound,
      ComputeReason.execNotFound,
    );
  });

  test("input the command does not read is bounded: RESOURCE_EXHAUSTED once 1 MiB waits", async () => {
    const execId = randomUUID();
    const exec = start({
      sandboxId: sandboxA,
      command: "/bin/sh",
      args: ["-c", "echo ready; sleep 4"],
      execId,
      stdin: true,
      timeout: durationFromMs(20_000),
    });
    await exec.waitFor("ready\n");
    const chunk = new Uint8Array(MAX_INPUT_CHUNK_BYTES);
    let accepted = 0;
    for (;;) {
      try {
        await client.sendExecInput({ sandboxId: sandboxA, execId, data: chunk });
        accepted += chunk.length;
      } catch (err) {
        const pe = fromConnectError(err);
        assert.equal(pe.code, Code.ResourceExhausted, pe.message);
        assert.equal(pe.reason, ComputeReason.stdinBufferFull);
        break;
      }
      // The socket buffers take some; beyond them at most MAX_INPUT_BUFFERED_BYTES wait in compute.
      assert.ok(accepted <= MAX_INPUT_BUFFERED_BYTES + 4 * 1024 * 1024, `accepted ${accepted} bytes`);
    }
    assert.ok(accepted >= MAX_INPUT_BUFFERED_BYTES - MAX_INPUT_CHUNK_BYTES, `accepted ${accepted} bytes`);
    assert.equal((await exec.done).exitCode, 0);
  });
});

describe("ExecCommand terminal and ResizeExecTerminal", () => {
  test("the command runs on a terminal of the size asked; typed input reaches it; a resize is seen", async () => {
    const execId = randomUUID();
    const exec = start({
      sandboxId: sandboxA,
      command: "/bin/sh",
      args: ["-c", 'test -t 0 && test -t 1 && echo tty; stty size; read line; echo "got:$line"; stty size'],
      execId,
      terminal: { rows: 30, cols: 100 },
    });
    await exec.waitFor("30 100");
    assert.match(exec.stdout, /^tty\r\n30 100\r\n/);
    await client.resizeExecTerminal({ sandboxId: sandboxA, execId, size: { rows: 45, cols: 132 } });
    await client.sendExecInput({ sandboxId: sandboxA, execId, data: enc("hello\r") });
    const completed = await exec.done;
    assert.equal(completed.exitCode, 0);
    assert.match(exec.stdout, /got:hello\r\n45 132\r\n$/);
    // The terminal echoes what was typed, as terminals do.
    assert.match(exec.stdout, /hello\r\ngot:/);
    await expectCode(
      client.resizeExecTerminal({ sandboxId: sandboxA, execId, size: { rows: 10, cols: 10 } }),
      Code.NotFound,
      ComputeReason.execNotFound,
    );
  });

  test("an exec with stdin but no terminal refuses a resize; a terminal larger than 1000 is refused", async () => {
    const execId = randomUUID();
    const exec = start({ sandboxId: sandboxA, command: "cat", execId, stdin: true });
    for (let i = 0; ; i++) {
      try {
        await client.resizeExecTerminal({ sandboxId: sandboxA, execId, size: { rows: 10, cols: 10 } });
        assert.fail("resized an exec without a terminal");
      } catch (err) {
        const pe = fromConnectError(err);
        if (pe.reason === ComputeReason.execNotFound && i < 100) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        assert.equal(pe.code, Code.FailedPrecondition, pe.message);
        break;
      }
    }
    await client.sendExecInput({ sandboxId: sandboxA, execId, eof: true });
    assert.equal((await exec.done).exitCode, 0);
    await expectCode(
      start({ sandboxId: sandboxA, command: "true", execId: randomUUID(), terminal: { rows: 1001, cols: 80 } }).done,
      Code.InvalidArgument,
    );
  });

  test("the sandbox is not held after terminal and stdin execs end (a pause is taken)", async () => {
    await client.pauseSandbox({ sandboxId: sandboxA });
    await client.resumeSandbox({ sandboxId: sandboxA });
  });
});
