// Long and hostile paths and command lines against the real compute server
// over gRPC (local driver, PostgreSQL): PATH_MAX / NAME_MAX are enforced in
// the sandbox's view with INVALID_ARGUMENT before any filesystem call, what
// fits works end to end, messages stay short, and one channel (Node's
// client and python3-grpcio) survives hundreds of hostile calls.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import { ComputeService, ReadFileRequestSchema } from "@platform/gen/compute/v1/compute_pb";
import { fromConnectError } from "@platform/rpc";
import { grpcioFlood, hasGrpcio } from "@platform/rpc/testing/grpcio-flood";
import { pino } from "pino";
import { type ComputeApp, createComputeApp } from "./app.ts";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { checkPathLimits, NAME_MAX, PATH_MAX, QUOTED_PATH_CHARS } from "./path-limits.ts";
import { cleanWorkspacePath } from "./paths.ts";
import { MAX_ARG_STRING_BYTES, MAX_COMMAND_LINE_BYTES } from "./service/exec-args.ts";
import { testComputeConfig } from "./testing/config.ts";

const logger = pino({ level: "silent" });
const MOUNT = "/workspace";
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** A relative path whose absolute form under MOUNT is exactly `total` bytes (components of at most 200). */
function relativeOfTotal(total: number, letter = "a"): string {
  let left = total - MOUNT.length - 1;
  const parts: string[] = [];
  while (left > 0) {
    const n = Math.min(200, left);
    // Never leave a remainder of 1 byte after a "/": shorten this part instead.
    const take = left - n === 1 ? n - 1 : n;
    parts.push(letter.repeat(take));
    left -= take;
    if (left > 0) left -= 1; // the separator
  }
  const rel = parts.join("/");
  assert.equal(Buffer.byteLength(`${MOUNT}/${rel}`), total);
  return rel;
}

function reasonOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    assert.ok(e instanceof PlatformError);
    assert.equal(e.code, Code.InvalidArgument);
    return e.reason;
  }
}

describe("path limits (unit)", () => {
  test("PATH_MAX counts the NUL: 4,095 bytes in the sandbox pass, 4,096 and 4,097 do not", () => {
    for (const total of [4094, 4095])
      assert.equal(
        reasonOf(() => cleanWorkspacePath(relativeOfTotal(total), MOUNT)),
        undefined,
      );
    for (const total of [4096, 4097, 9000]) {
      assert.equal(
        reasonOf(() => cleanWorkspacePath(relativeOfTotal(total), MOUNT)),
        ComputeReason.pathTooLong,
        `${total}`,
      );
      // The same path given absolute.
      assert.equal(
        reasonOf(() => cleanWorkspacePath(`${MOUNT}/${relativeOfTotal(total)}`, MOUNT)),
        ComputeReason.pathTooLong,
      );
    }
    // The reported range: relative paths of 4,081-4,095 characters are 4,092-4,106 bytes under /workspace/.
    for (let chars = 4081; chars <= 4095; chars++) {
      const rel = relativeOfTotal(chars + MOUNT.length + 1);
      assert.equal(rel.length, chars);
      const expected = chars + MOUNT.length + 1 + 1 > PATH_MAX ? ComputeReason.pathTooLong : undefined;
      assert.equal(
        reasonOf(() => cleanWorkspacePath(rel, MOUNT)),
        expected,
        `${chars} characters`,
      );
    }
  });

  test("counted in UTF-8 bytes, per component for NAME_MAX", () => {
    assert.equal(
      reasonOf(() => checkPathLimits(`/w/${"n".repeat(NAME_MAX)}`, "path")),
      undefined,
    );
    assert.equal(
      reasonOf(() => checkPathLimits(`/w/${"n".repeat(NAME_MAX + 1)}`, "path")),
      ComputeReason.pathTooLong,
    );
    // 128 characters, 256 bytes.
    assert.equal(
      reasonOf(() => checkPathLimits(`/w/${"é".repeat(128)}`, "path")),
      ComputeReason.pathTooLong,
    );
    assert.equal(
      reasonOf(() => checkPathLimits(`/w/${"é".repeat(127)}`, "path")),
      undefined,
    );
    // 2,121 characters, 4,221 bytes: under PATH_MAX in characters, over it in bytes.
    assert.equal(
      reasonOf(() => checkPathLimits(`/${"é".repeat(100)}`.repeat(21), "path")),
      ComputeReason.pathTooLong,
    );
  });

  test("a mount path is held to the same limits", () => {
    assert.equal(
      reasonOf(() => cleanWorkspacePath("a", `/${"m".repeat(256)}`)),
      ComputeReason.pathTooLong,
    );
  });
});

describe("hostile paths over gRPC (real compute server, local driver)", () => {
  let database: Database<unknown>;
  let dataDir: string;
  let driver: LocalDriver;
  let app: ComputeApp;
  let url: string;
  let client: Client<typeof ComputeService>;
  let sandboxId: string;

  before(async () => {
    database = await createTestDatabase<unknown>();
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-hostile-"));
    fs.chmodSync(dataDir, 0o711);
    driver = new LocalDriver({
      dataDir,
      killGraceMs: 500,
      pidsMax: 128,
      cgroupPrefix: `platform-compute-hostile-${process.pid}`,
      logger,
      dieWithService: true,
    });
    // Plaintext (INTERNAL_TLS=off): what is tested here is the compute port's answers, not its TLS.
    const overrides = { driver, database, internalTls: undefined };
    app = await createComputeApp(
      testComputeConfig({ COMPUTE_DATA_DIR: dataDir, COMPUTE_DRIVER: "local" }),
      logger,
      overrides,
    );
    url = (await app.server.listen()).url;
    client = createClient(ComputeService, createGrpcTransport({ baseUrl: url }));
    sandboxId = (await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID() })).sandboxId;
    await client.writeFile({ sandboxId, path: "hello.txt", data: enc("hello") });
  });

  after(async () => {
    if (sandboxId) await client.destroySandbox({ sandboxId }).catch(() => {});
    await app?.close();
    await driver?.close();
    await database?.close();
    // The deepest trees are longer than PATH_MAX on the host: remove them bottom-up from inside.
    if (dataDir) await removeDeep(dataDir);
  });

  async function expectInvalid(p: Promise<unknown>, reason: string): Promise<void> {
    await assert.rejects(p, (e: unknown) => {
      const err = fromConnectError(e);
      assert.equal(err.code, Code.InvalidArgument, `${Code[err.code]}: ${err.message}`);
      assert.equal(err.reason, reason);
      assert.ok(err.message.length <= QUOTED_PATH_CHARS + 120, `message of ${err.message.length} characters`);
      return true;
    });
  }

  test("ReadFile/WriteFile/ListFiles at 4,095 bytes work; 4,096 and 4,097 are INVALID_ARGUMENT, never INTERNAL", async () => {
    const rel = relativeOfTotal(PATH_MAX - 1);
    assert.equal(Number((await client.writeFile({ sandboxId, path: rel, data: enc("deep") })).bytesWritten), 4);
    assert.equal(dec((await client.readFile({ sandboxId, path: rel })).data), "deep");
    assert.equal(dec((await client.readFile({ sandboxId, path: `${MOUNT}/${rel}` })).data), "deep", "absolute form");
    const parent = rel.slice(0, rel.lastIndexOf("/"));
    const listed = await client.listFiles({ sandboxId, path: parent });
    assert.deepEqual(
      listed.entries.map((e) => e.path),
      [rel.slice(rel.lastIndexOf("/") + 1)],
    );
    for (const total of [PATH_MAX, PATH_MAX + 1]) {
      const over = relativeOfTotal(total, "b");
      await expectInvalid(client.writeFile({ sandboxId, path: over, data: enc("x") }), ComputeReason.pathTooLong);
      await expectInvalid(client.readFile({ sandboxId, path: over }), ComputeReason.pathTooLong);
      await expectInvalid(client.listFiles({ sandboxId, path: over }), ComputeReason.pathTooLong);
    }
    for (let chars = 4081; chars <= 4095; chars++) {
      const path = relativeOfTotal(chars + MOUNT.length + 1, "c");
      if (chars + MOUNT.length + 2 <= PATH_MAX) {
        await client.writeFile({ sandboxId, path, data: enc(String(chars)) });
        assert.equal(dec((await client.readFile({ sandboxId, path })).data), String(chars));
      } else {
        await expectInvalid(client.writeFile({ sandboxId, path, data: enc("x") }), ComputeReason.pathTooLong);
        await expectInvalid(client.readFile({ sandboxId, path }), ComputeReason.pathTooLong);
      }
    }
    await client.writeFile({ sandboxId, path: "n".repeat(NAME_MAX), data: enc("x") });
    await expectInvalid(
      client.writeFile({ sandboxId, path: "n".repeat(NAME_MAX + 1), data: enc("x") }),
      ComputeReason.pathTooLong,
    );
  });

  test("ExecCommand: working_dir, command and the command line are bounded like PATH_MAX and ARG_MAX", async () => {
    const run = async (req: Parameters<typeof client.execCommand>[0]) => {
      let out = "";
      let exit: number | undefined;
      for await (const e of client.execCommand(req)) {
        if (e.event.case === "stdout") out += dec(e.event.value.data);
        if (e.event.case === "completed") exit = e.event.value.exitCode;
      }
      return { out, exit };
    };
    await client.writeFile({ sandboxId, path: relativeOfTotal(PATH_MAX - 1), data: enc("deep") });
    await expectInvalid(
      run({ sandboxId, command: "/bin/true", workingDir: relativeOfTotal(PATH_MAX) }),
      ComputeReason.pathTooLong,
    );
    await expectInvalid(run({ sandboxId, command: `/${"x".repeat(NAME_MAX + 1)}` }), ComputeReason.pathTooLong);
    await expectInvalid(
      run({ sandboxId, command: "/bin/true", args: ["a".repeat(MAX_ARG_STRING_BYTES + 1)] }),
      ComputeReason.argumentsTooLong,
    );
    await expectInvalid(
      run({ sandboxId, command: "/bin/true", env: { BIG: "v".repeat(MAX_ARG_STRING_BYTES) } }),
      ComputeReason.argumentsTooLong,
    );
    const many = Array.from({ length: Math.ceil(MAX_COMMAND_LINE_BYTES / MAX_ARG_STRING_BYTES) + 1 }, () =>
      "a".repeat(MAX_ARG_STRING_BYTES),
    );
    await expectInvalid(run({ sandboxId, command: "/bin/true", args: many }), ComputeReason.argumentsTooLong);
    // 5 MiB of arguments in 1 MiB strings: refused before the exec helper (whose requests stop at 4 MiB) sees it.
    await expectInvalid(
      run({ sandboxId, command: "/bin/true", args: Array.from({ length: 5 }, () => "z".repeat(1 << 20)) }),
      ComputeReason.argumentsTooLong,
    );
    // What fits runs: the longest single argument the kernel takes, the deepest working directory.
    const longest = "q".repeat(MAX_ARG_STRING_BYTES);
    const ok = await run({ sandboxId, command: "/bin/sh", args: ["-c", 'printf %s "$1" | wc -c', "sh", longest] });
    assert.deepEqual(ok, { out: `${MAX_ARG_STRING_BYTES}\n`, exit: 0 });
    const deepDir = relativeOfTotal(PATH_MAX - 1)
      .split("/")
      .slice(0, -1)
      .join("/");
    const pwd = await run({ sandboxId, command: "/bin/sh", args: ["-c", "pwd | wc -c"], workingDir: deepDir });
    assert.deepEqual(pwd, { out: `${MOUNT.length + 1 + deepDir.length + 1}\n`, exit: 0 });
  });

  test("the local driver's exec helper refuses a NUL inside a field (its requests are NUL-separated)", async () => {
    // Past the domain's own check: shifted fields would name the stream socket and the cgroup.procs files the root helper writes to.
    const marker = join(dataDir, "marker");
    fs.writeFileSync(marker, "");
    const workingDir = `${MOUNT}\0/tmp/x.sock\x000\x001\x00${marker}\x001\x00/bin/sh`;
    const events = driver.exec(sandboxId, { command: "/bin/true", args: [], env: {}, workingDir });
    await assert.rejects(
      (async () => {
        for await (const _ of events) {
          // drain
        }
      })(),
      (e: unknown) => {
        const cause = (e as { cause?: unknown }).cause;
        assert.ok(cause instanceof PlatformError, String(cause));
        assert.equal(cause.code, Code.InvalidArgument);
        return true;
      },
    );
    assert.equal(fs.readFileSync(marker, "utf8"), "");
    const after = [];
    for await (const e of driver.exec(sandboxId, { command: "/bin/true", args: [], env: {}, workingDir: MOUNT }))
      after.push(e);
    assert.equal(after.at(-1)?.type, "completed");
  });

  test("the local driver refuses a command line its exec helper could not read, and the helper lives on", async () => {
    const drain = async (args: string[]) => {
      const events = [];
      for await (const e of driver.exec(sandboxId, { command: "/bin/sh", args, env: {}, workingDir: MOUNT }))
        events.push(e);
      return events;
    };
    // 5 MiB: past the domain's bound, and the helper's 4 MiB requests (it used to exit, losing every running command).
    await assert.rejects(drain(Array.from({ length: 5 }, () => "z".repeat(1 << 20))), (e: unknown) => {
      const cause = (e as { cause?: unknown }).cause;
      assert.ok(cause instanceof PlatformError && cause.reason === ComputeReason.argumentsTooLong, String(cause));
      return true;
    });
    const sleeping = drain(["-c", "sleep 0.3; echo survived"]);
    await assert.rejects(drain(Array.from({ length: 70_000 }, () => "f")));
    const events = await sleeping;
    assert.equal(events.at(-1)?.type, "completed");
    assert.ok(
      events.some((e) => e.type === "stdout" && dec(e.data) === "survived\n"),
      "a command running meanwhile is not lost",
    );
  });

  /** 320 hostile ReadFile/WriteFile/ListFiles paths, each answered INVALID_ARGUMENT. */
  function hostilePaths(): string[] {
    const paths: string[] = [];
    const garbage = (n: number) =>
      Array.from(randomBytes(n), (b) => String.fromCharCode(b === 0 ? 1 : b < 0x80 ? b : 0x100 + b)).join("");
    for (let i = 0; i < 80; i++) {
      paths.push(`${"x/../".repeat(18_000)}${i}`); // 90 KB with ..
      paths.push(relativeOfTotal(4095 + MOUNT.length + 1 + (i % 3), "h").slice(0, 4095)); // 4,095 characters
      paths.push(i % 2 ? garbage(5_000 + i) : `${garbage(200)}/${"g".repeat(300)}`); // NUL-free garbage, too long
      paths.push(`${"../".repeat(1 + i * 12)}etc/passwd`); // deep ../ chains (escape)
    }
    return paths;
  }

  test("one Node channel: 320 hostile calls, all INVALID_ARGUMENT with short messages, then a normal call", async () => {
    const paths = hostilePaths();
    const calls = paths.map((path, i) =>
      i % 3 === 0
        ? client.readFile({ sandboxId, path })
        : i % 3 === 1
          ? client.writeFile({ sandboxId, path, data: enc("x") })
          : client.listFiles({ sandboxId, path }),
    );
    const results = await Promise.allSettled(calls);
    const codes = new Map<string, number>();
    for (const r of results) {
      const key = r.status === "fulfilled" ? "OK" : Code[ConnectError.from(r.reason).code];
      codes.set(key ?? "?", (codes.get(key ?? "?") ?? 0) + 1);
      if (r.status === "rejected") assert.ok(ConnectError.from(r.reason).rawMessage.length <= 512);
    }
    assert.deepEqual([...codes], [["InvalidArgument", paths.length]]);
    assert.equal(dec((await client.readFile({ sandboxId, path: "hello.txt" })).data), "hello");
  });

  test("one python3-grpcio channel: 320 hostile ReadFile calls, all INVALID_ARGUMENT, then a normal call", async (t) => {
    if (!(await hasGrpcio())) {
      t.skip("python3-grpcio not installed (scripts/setup.sh installs it)");
      return;
    }
    const read = (path: string) => toBinary(ReadFileRequestSchema, create(ReadFileRequestSchema, { sandboxId, path }));
    const result = await grpcioFlood({
      target: new URL(url).host,
      method: "/compute.v1.ComputeService/ReadFile",
      requests: hostilePaths().map(read),
      rounds: 1,
      final: { method: "/compute.v1.ComputeService/ReadFile", request: read("hello.txt") },
    });
    assert.deepEqual(result.codes, { INVALID_ARGUMENT: 320 }, JSON.stringify(result.samples));
    assert.ok(result.max_message <= 512, `grpc-message of ${result.max_message} bytes`);
    assert.ok(result.max_trailing < 2048, `trailing metadata of ${result.max_trailing} bytes`);
    assert.equal(result.final, "OK");
  });
});

/** fs.rm fails with ENAMETOOLONG on trees deeper than PATH_MAX on the host; GNU rm walks them with openat. */
function removeDeep(dir: string): Promise<void> {
  return new Promise<void>((resolve) => execFile("rm", ["-rf", "--one-file-system", dir], () => resolve()));
}
