// test-timeout: 2400000
// `platform files` as a user runs it (the real binary) against identity,
// compute and agents started by the test: a 1 GiB file (FILES_TEST_MIB to
// try another size) goes up and comes back with the same SHA-256 (the MiB/s
// of each way is printed; ~3 MiB/s each way at a load average of 35 on this
// 2-core machine, hence the long timeout), ls shows
// it, paths that leave the workspace are refused with 400 before compute,
// and another organization's session is a 404.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  createReadStream,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../testing/platform-stack.ts";

const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
const SIZE = Number(process.env.FILES_TEST_MIB ?? "1024") * 1024 * 1024;
let stack: PlatformStack;
let token: string;
let session: string;
let work: string;

type Result = { code: number | null; stdout: string; stderr: string };

function run(args: string[], env: NodeJS.ProcessEnv = {}, cwd?: string): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd,
      env: { ...stack.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function ok(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const r = await run(args, env);
  assert.equal(
    r.code,
    0,
    `platform ${args.join(" ")} → ${r.code}\n${r.stdout}\n${r.stderr}\n${r.code === 0 ? "" : stack.logs()}`,
  );
  return r;
}

/** The error a failed --json command printed on stderr. */
async function fails(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: string; status?: number }> {
  const r = await run([...args, "--json"], env);
  assert.equal(r.code, 1, `platform ${args.join(" ")} should fail\n${r.stdout}\n${r.stderr}`);
  const { code, status } = (
    JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { error: { code: string; status?: number } }
  ).error;
  return { code, status };
}

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
async function api(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${stack.endpoints.agents}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
  return res.status === 204 ? undefined : res.json();
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 8 << 20 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/**
 * A file that a misplaced, repeated or lost chunk would change: a random
 * 4 MiB block repeated, each MiB stamped with its index. Returns the SHA-256
 * of what it wrote, hashed on the way (reading the file back took as long again).
 */
function writeGiB(path: string): string {
  const block = Buffer.alloc(4 << 20);
  for (let i = 0; i < block.length; i += 4096) block.fill(Math.floor(Math.random() * 256), i, i + 4096);
  const hash = createHash("sha256");
  const fd = openSync(path, "w");
  try {
    for (let off = 0; off < SIZE; off += block.length) {
      for (let mib = 0; mib < 4; mib++) block.writeUInt32BE(off / (1 << 20) + mib, mib << 20);
      hash.update(block);
      let done = 0;
      while (done < block.length) done += writeSync(fd, block, done);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

before(
  async () => {
    stack = await startPlatform();
    work = join(stack.dataDir, "files-test");
    mkdirSync(work);
    await ok(["login", "--email", OWNER.email], { PLATFORM_PASSWORD: OWNER.password });
    const login = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(OWNER),
    });
    token = ((await login.json()) as { access_token: string }).access_token;
    const agent = (await api("POST", "/v1/agents", { name: "Files", slug: "files", model: "dev/echo" })).id;
    session = (await api("POST", "/v1/sessions", { agentId: agent })).id;
  },
  { timeout: 420_000 },
);
after(async () => {
  await stack?.stop();
});

test(`a ${SIZE >> 20} MiB file round-trips through upload and download with the same SHA-256; ls lists it`, {
  timeout: 2_000_000,
}, async () => {
  const original = join(work, "big.bin");
  const expected = writeGiB(original);
  assert.equal(statSync(original).size, SIZE);
  const up = JSON.parse((await ok(["files", "upload", session, original, "data/big.bin", "--json"])).stdout) as {
    bytes: number;
    sha256: string;
    seconds: number;
    remote: string;
  };
  assert.equal(up.bytes, SIZE);
  assert.equal(up.sha256, expected);
  assert.equal(up.remote, "data/big.bin");
  rmSync(original);
  const listed = JSON.parse((await ok(["files", "ls", session, "data", "--json"])).stdout) as {
    items: Array<{ path: string; size: number; isDir: boolean }>;
  };
  assert.deepEqual(
    listed.items.map((e) => [e.path, Number(e.size), e.isDir]),
    [["big.bin", SIZE, false]],
  );
  const copy = join(work, "copy.bin");
  const down = JSON.parse((await ok(["files", "download", session, "data/big.bin", copy, "--json"])).stdout) as {
    bytes: number;
    sha256: string;
    seconds: number;
  };
  assert.equal(down.bytes, SIZE);
  assert.equal(statSync(copy).size, SIZE);
  assert.equal(await sha256Of(copy), expected);
  assert.equal(down.sha256, expected);
  rmSync(copy);
  const mib = SIZE >> 20;
  console.log(
    `${mib} MiB: upload ${(mib / up.seconds).toFixed(1)} MiB/s (${up.seconds.toFixed(1)} s), download ${(mib / down.seconds).toFixed(1)} MiB/s (${down.seconds.toFixed(1)} s)`,
  );
});

test("small files: human output, an empty file, a directory target, stdout, the mode kept", async () => {
  const small = join(work, "hello.sh");
  writeFileSync(small, "#!/bin/sh\necho hi\n", { mode: 0o755 });
  assert.match(
    (await ok(["files", "upload", session, small, "bin/"])).stdout,
    /^uploaded 18 bytes .*hello\.sh → bin\/hello\.sh {2}sha256 [0-9a-f]{64}$/m,
  );
  const empty = join(work, "empty");
  writeFileSync(empty, "");
  await ok(["files", "upload", session, empty]);
  const ls = (await ok(["files", "ls", session, "--recursive"])).stdout;
  assert.match(ls, /^- 0755 +18 .* bin\/hello\.sh$/m);
  assert.match(ls, /^- 0644 +0 .* empty$/m);
  assert.match(ls, /^d \d{4} +\d+ .* bin\/$/m);
  assert.equal(
    (await ok(["files", "download", session, "/workspace/bin/hello.sh", "-"])).stdout,
    "#!/bin/sh\necho hi\n",
  );
  const here = join(work, "again");
  await ok(["files", "download", session, "empty", here]);
  assert.equal(readFileSync(here, "utf8"), "");
});

test("paths that leave the workspace are 400 invalid_argument; a missing file 404; nothing half-written stays", async () => {
  const small = join(work, "x.txt");
  writeFileSync(small, "x");
  for (const bad of ["../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd", `${"a".repeat(256)}/x`]) {
    assert.deepEqual(
      await fails(["files", "download", session, bad, join(work, "out")]),
      { code: "invalid_argument", status: 400 },
      bad,
    );
    assert.deepEqual(
      await fails(["files", "upload", session, small, bad]),
      { code: "invalid_argument", status: 400 },
      bad,
    );
  }
  assert.deepEqual(await fails(["files", "ls", session, "../.."]), { code: "invalid_argument", status: 400 });
  // The REST surface itself: a file call without a path, and the workspace root as a file.
  for (const query of ["", "?path=", "?path=%2Fworkspace", "?path=.", "?path=x&offset=-1"]) {
    const res = await fetch(`${stack.endpoints.agents}/v1/sessions/${session}/files:read${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 400, query);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "invalid_argument");
  }
  // Refused before compute is asked: a session without a sandbox still has none after its bad calls.
  const fresh = (
    await api("POST", "/v1/sessions", { agentId: (await api("GET", `/v1/sessions/${session}`)).session.agentId })
  ).id;
  assert.equal((await fails(["files", "download", fresh, "../x", join(work, "out")])).status, 400);
  assert.equal((await fails(["files", "upload", fresh, small, "/etc/x"])).status, 400);
  assert.equal((await fails(["files", "ls", fresh, "../.."])).status, 400);
  assert.equal((await api("GET", `/v1/sessions/${fresh}`)).session.sandboxId ?? "", "");
  const missing = await fails(["files", "download", session, "nope.txt", join(work, "nope")]);
  assert.equal(missing.status, 404);
  assert.throws(() => statSync(join(work, "nope.part")));
  assert.throws(() => statSync(join(work, "out.part")));
  // Refused before any byte, named by the remote path in the current directory: no `.part` left there either.
  const cwd = mkdtempSync(join(work, "cwd-"));
  for (const remote of ["../down.bin", "missing.bin"])
    assert.equal((await run(["files", "download", session, remote], {}, cwd)).code, 1, remote);
  // Not logged in: refused with no round trip at all, while a file made up front would still be opening.
  const nobody = { PLATFORM_CONFIG_DIR: mkdtempSync(join(work, "config-")) };
  for (let i = 0; i < 5; i++)
    assert.equal((await run(["files", "download", session, "anon.bin"], nobody, cwd)).code, 1);
  assert.deepEqual(readdirSync(cwd), []);
});

test("another organization's session is 404 for every file call; a malformed session id 400", async () => {
  // The same person in a second org of their own, with a CLI config of its own.
  const other = { PLATFORM_CONFIG_DIR: join(work, "other-config") };
  await ok(["login", "--email", OWNER.email], { ...other, PLATFORM_PASSWORD: OWNER.password });
  await ok(["orgs", "create", "--name", "Other Org", "--slug", "other-org"], other);
  await ok(["orgs", "switch", "other-org"], other);
  const small = join(work, "y.txt");
  writeFileSync(small, "y");
  await ok(["files", "upload", session, small]);
  assert.equal((await fails(["files", "ls", session], other)).status, 404);
  assert.equal((await fails(["files", "download", session, "y.txt", join(work, "y2")], other)).status, 404);
  assert.equal((await fails(["files", "upload", session, small, "z.txt"], other)).status, 404);
  // Still there, unchanged, for its own org.
  assert.equal((await ok(["files", "download", session, "y.txt", "-"])).stdout, "y");
  assert.equal((await fails(["files", "ls", "not-a-uuid"])).status, 400);
});
