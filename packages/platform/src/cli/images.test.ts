// test-timeout: 300000
// `platform images` (issue 22) against a real compute on its mutual-TLS port,
// with the launcher's operator certificate: import a tarball made here (the
// host's own sh and cat), list it, refuse a hostile archive by the entry's
// name, remove it; without the operator certificate's key nothing is asked.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { ensurePki, serviceTlsFiles } from "@platform/pki";
import { rawTar, stageRootfs, tarLayer } from "../../../compute/src/testing/image-fixtures.ts";

const root = new URL("../../../../", import.meta.url).pathname;
const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
const exec = promisify(execFile);
let dir: string;
let compute: ReturnType<typeof spawn> | undefined;
let log = "";

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "platform-images-"));
  const tls = join(dir, "tls");
  await ensurePki(tls, { names: ["compute", "operator", "agents"] });
  const port = await freePort();
  const files = serviceTlsFiles(tls, "compute");
  compute = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", join(root, "packages/compute/src/main.ts")], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      LOG_LEVEL: "warn",
      COMPUTE_PORT: String(port),
      COMPUTE_DATA_DIR: join(dir, "compute"),
      COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
      TLS_CA_FILE: files.caFile,
      TLS_CERT_FILE: files.certFile,
      TLS_KEY_FILE: files.keyFile,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  compute.stdout?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-4000);
  });
  compute.stderr?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-4000);
  });
  writeFileSync(
    join(dir, "platform.json"),
    JSON.stringify({ endpoints: { computeGrpc: `https://127.0.0.1:${port}` } }),
  );
  const stage = join(dir, "stage");
  stageRootfs(stage, { "etc/os-release": "ID=cli\n" }, ["sh", "cat"]);
  await tarLayer(stage, join(dir, "rootfs.tar.gz"), true);
  rawTar(join(dir, "hostile.tar"), [{ name: "../escape", type: "file", data: "x" }]);
  for (let i = 0; ; i++) {
    const r = await cli(["images", "list", "--json"]);
    if (r.code === 0) break;
    if (i > 600 || compute.exitCode !== null) throw new Error(`compute did not start: ${r.stderr}\n${log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
});
after(() => {
  compute?.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [bin, ...args], {
      env: { PATH: process.env.PATH ?? "", PLATFORM_DATA_DIR: dir, PLATFORM_CONFIG_DIR: join(dir, "config") },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test("images import, list, a hostile archive refused by its entry, rm", async () => {
  const imported = await cli(["images", "import", join(dir, "rootfs.tar.gz"), "--name", "cli:1", "--json"]);
  assert.equal(imported.code, 0, imported.stderr);
  const image = JSON.parse(imported.stdout) as { name: string; digest: string; source: string };
  assert.equal(image.name, "cli:1");
  assert.match(image.digest, /^sha256:[0-9a-f]{64}$/);

  const list = await cli(["images", "list"]);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /^cli:1 {2}sha256:[0-9a-f]{12} {2}[\d.]+ MiB/m);
  assert.match(
    list.stderr,
    /default: debian:bookworm-slim \(not stored: sandboxes without an image see the host's \/usr\)/,
  );

  const hostile = await cli(["images", "import", join(dir, "hostile.tar"), "--name", "bad:1"]);
  assert.equal(hostile.code, 1);
  assert.match(hostile.stderr, /invalid_argument: image layer rootfs: entry "..\/escape" refused: '..' in its name/);

  const rm = await cli(["images", "rm", "cli:1"]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.match(rm.stdout, /^removed cli:1 /);
  const again = await cli(["images", "rm", "cli:1"]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /not_found: no image cli:1/);
  assert.deepEqual(JSON.parse((await cli(["images", "list", "--json"])).stdout).images, []);
});
