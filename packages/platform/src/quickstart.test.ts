// The newcomer's path, verbatim: a clean clone, the README's run command, the
// README's walkthroughs (CLI, curl, buf curl) against the running platform,
// Ctrl-C, and a second start that reuses the data.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

const root = new URL("../../..", import.meta.url).pathname;
const ports = [8080, 8081, 8082, 50051, 50052, 50053];
let dir: string;
let clone: string;
/** Started platforms, stopped whatever the test's outcome. */
const started: Array<ReturnType<typeof start>> = [];

before(() => {
  dir = mkdtempSync(join(tmpdir(), "quickstart-"));
  clone = join(dir, "platform");
  execFileSync("git", ["clone", "-q", root, clone]);
});
after(async () => {
  for (const p of started) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      try {
        process.kill(-p.child.pid!, "SIGINT");
      } catch {}
      await Promise.race([p.exited, new Promise((r) => setTimeout(r, 30_000))]);
      try {
        process.kill(-p.child.pid!, "SIGKILL");
      } catch {}
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

const portInUse = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ port, host: "127.0.0.1" });
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });

/** The README's run command, as a user starts it in a terminal (own process group). */
function start(): { child: ChildProcess; output: () => string; ready: Promise<void>; exited: Promise<number | null> } {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("PLATFORM_") && k !== "DATABASE_URL"));
  const child = spawn("bash", ["scripts/run.sh"], { cwd: clone, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  started.push({ child, output: () => out, ready: Promise.resolve(), exited });
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not up within 6 minutes:\n${out}\n${err.slice(-3000)}`)), 360_000);
    const check = setInterval(() => {
      if (out.includes("Ctrl-C stops everything.")) {
        clearInterval(check);
        clearTimeout(timer);
        resolve();
      }
    }, 200);
    void exited.then((code) => {
      clearInterval(check);
      clearTimeout(timer);
      reject(new Error(`run command exited (${code}) before the platform was up:\n${out}\n${err.slice(-3000)}`));
    });
  });
  return { child, output: () => out, ready, exited };
}

/** Ctrl-C: SIGINT to the whole foreground process group. */
async function stop(p: ReturnType<typeof start>): Promise<number | null> {
  process.kill(-p.child.pid!, "SIGINT");
  const code = await Promise.race([p.exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 60_000))]);
  assert.notEqual(code, "timeout", "the platform stops within 60 s of Ctrl-C");
  return code as number | null;
}

/** Processes whose command line or working directory is inside the clone. */
function leftovers(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      let cwd = "";
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
      } catch {}
      if (cmd.includes(clone) || cwd.startsWith(clone)) found.push(`${pid} ${cmd.slice(0, 160)}`);
    } catch {}
  }
  return found;
}

function walkthrough(): string {
  const readme = readFileSync(join(clone, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/<!-- walkthrough:(\w+) -->\s*```sh\n([\s\S]*?)```/g)];
  assert.deepEqual(
    blocks.map((b) => b[1]),
    ["cli", "curl", "buf"],
  );
  return blocks.map((b) => b[2]).join("\n");
}

test("quick start from a clean clone: run, walk through, Ctrl-C, start again", { timeout: 900_000 }, async () => {
  for (const port of ports) assert.equal(await portInUse(port), false, `port ${port} must be free for the quick start`);

  const first = start();
  await first.ready;
  const printed = first.output();
  const secrets = JSON.parse(readFileSync(join(clone, ".data/secrets.json"), "utf8")) as { ownerPassword: string };
  for (const line of [
    "identity REST   http://127.0.0.1:8081",
    "identity gRPC   https://127.0.0.1:50051",
    "compute gRPC    https://127.0.0.1:50052",
    "agents REST     http://127.0.0.1:8082",
    "agents gRPC     https://127.0.0.1:50053",
    "runtime router  http://127.0.0.1:8080",
    "email     owner@example.com",
    `password  ${secrets.ownerPassword}`,
    "platform.mjs login --email owner@example.com",
  ]) {
    assert.ok(printed.includes(line), `prints ${JSON.stringify(line)}\n${printed}`);
  }
  const file = JSON.parse(readFileSync(join(clone, ".data/platform.json"), "utf8")) as { endpoints: Record<string, string> };
  assert.equal(file.endpoints.router, "http://127.0.0.1:8080");
  assert.equal(file.endpoints.agentsGrpc, "https://127.0.0.1:50053");
  // The private CA and every service's certificate, keys readable by the owner only.
  for (const name of ["ca", "identity", "compute", "agents", "runtime-router", "runtime-worker", "operator"]) {
    assert.ok(existsSync(join(clone, `.data/tls/${name}.crt`)), `${name}.crt`);
    assert.equal(statSync(join(clone, `.data/tls/${name}.key`)).mode & 0o777, 0o600, `${name}.key`);
  }
  const caBefore = readFileSync(join(clone, ".data/tls/ca.crt"), "utf8");

  let out: string;
  try {
    out = execFileSync("bash", ["-euo", "pipefail", "-c", walkthrough()], {
      cwd: clone,
      encoding: "utf8",
      timeout: 300_000,
      env: { ...process.env, PLATFORM_CONFIG_DIR: join(dir, "cli-config") },
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    assert.fail(`walkthrough failed:\n${e.stdout}\n${e.stderr}`);
  }
  for (const expected of [
    "logged in as owner@example.com",
    "created agent",
    "hello from the sandbox",
    "key: sk_live_",
    '"email":"owner@example.com"',
    '"type":"tool_use"',
    '"type":"tool_result"',
    '"type":"done"',
    "event: turn_done",
    "identity.v1.AuthService/VerifyToken",
    '"method": "jwt_session"',
    "compute.v1.ComputeService/ExecCommand",
  ]) {
    assert.ok(out.includes(expected), `walkthrough prints ${JSON.stringify(expected)}\n${out}`);
  }

  assert.equal(await stop(first), 0, "Ctrl-C is a clean exit");
  await new Promise((r) => setTimeout(r, 2000));
  assert.deepEqual(leftovers(), [], "no process of the platform survives Ctrl-C");

  const second = start();
  await second.ready;
  assert.ok(second.output().includes("unchanged since the first start"), second.output());
  assert.equal(readFileSync(join(clone, ".data/tls/ca.crt"), "utf8"), caBefore, "the second start reuses the CA");
  const again = execFileSync(
    "bash",
    ["-euo", "pipefail", "-c", `node packages/platform/bin/platform.mjs login --email owner@example.com --password '${secrets.ownerPassword}' && node packages/platform/bin/platform.mjs agents list`],
    { cwd: clone, encoding: "utf8", env: { ...process.env, PLATFORM_CONFIG_DIR: join(dir, "cli-config-2") } },
  );
  assert.match(again, /shell {2}dev\/echo/, "the agent of the first run is still there");
  assert.equal(await stop(second), 0);
  await new Promise((r) => setTimeout(r, 2000));
  assert.deepEqual(leftovers(), []);
  assert.ok(existsSync(join(clone, ".data/identity")));
});
