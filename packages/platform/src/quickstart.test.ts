// test-timeout: 1800000
// The newcomer's path, verbatim: a clean clone, the README's run command, the
// README's walkthroughs (CLI, curl, buf curl) exactly as written, twice in a
// row, against the running platform, Ctrl-C, and a second start that reuses
// the data. On free ports, not the defaults: the walkthroughs must find the
// endpoints in .data/platform.json, and a quick start running on this machine
// must not fail the test.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { freePort } from "./testing/free-port.ts";
import { ProcessGroup } from "./testing/process-group.ts";

const root = new URL("../../..", import.meta.url).pathname;
const defaults = [8080, 8081, 8082, 50051, 50052, 50053];
/** identity REST, identity gRPC, compute, agents REST, agents gRPC, router: chosen free in `before`. */
const ports: number[] = [];
let dir: string;
let clone: string;
/** Started platforms, stopped whatever the test's outcome. */
const started: Array<ReturnType<typeof start>> = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "quickstart-"));
  clone = join(dir, "platform");
  execFileSync("git", ["clone", "-q", root, clone]);
  while (ports.length < 6) {
    const p = await freePort("127.0.0.1");
    if (!ports.includes(p) && !defaults.includes(p)) ports.push(p);
  }
});
after(async () => {
  for (const p of started) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      try {
        p.group.signal("SIGINT");
      } catch {}
      await Promise.race([p.exited, new Promise((r) => setTimeout(r, 30_000).unref())]);
      p.group.signal("SIGKILL");
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The README's run command, as a user starts it in a terminal (own process group), with the ports moved as the README says. */
function start(): {
  child: ChildProcess;
  group: ProcessGroup;
  output: () => string;
  ready: Promise<void>;
  exited: Promise<number | null>;
} {
  const env = {
    ...Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("PLATFORM_") && k !== "DATABASE_URL"),
    ),
    // No default image build (minutes of Debian downloads); default-image.test covers it.
    COMPUTE_DEFAULT_IMAGE_PACKAGES: "",
    PLATFORM_IDENTITY_PORT: String(ports[0]),
    PLATFORM_IDENTITY_GRPC_PORT: String(ports[1]),
    PLATFORM_COMPUTE_PORT: String(ports[2]),
    PLATFORM_AGENTS_PORT: String(ports[3]),
    PLATFORM_AGENTS_GRPC_PORT: String(ports[4]),
    PLATFORM_ROUTER_PORT: String(ports[5]),
  };
  const child = spawn("bash", ["scripts/run.sh"], {
    cwd: clone,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const group = new ProcessGroup(child.pid!);
  let out = "";
  let err = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  started.push({ child, group, output: () => out, ready: Promise.resolve(), exited });
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
  return { child, group, output: () => out, ready, exited };
}

/** Ctrl-C: SIGINT to the whole foreground process group. */
async function stop(p: ReturnType<typeof start>): Promise<number | null> {
  p.group.signal("SIGINT");
  const code = await Promise.race([
    p.exited,
    new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 60_000).unref()),
  ]);
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

/** The README's walkthrough blocks, by name, as written. */
function walkthroughs(): Record<string, string> {
  const readme = readFileSync(join(clone, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/<!-- walkthrough:(\w+) -->\s*```sh\n([\s\S]*?)```/g)];
  assert.deepEqual(
    blocks.map((b) => b[1]),
    ["cli", "curl", "buf"],
  );
  return Object.fromEntries(blocks.map((b) => [b[1], b[2]]));
}

/** Runs shell text as a user pasting it into a fresh `bash` would (no options beyond the text's own). */
function sh(script: string, configDir: string): { code: number; out: string; err: string } {
  try {
    const out = execFileSync("bash", ["-c", script], {
      cwd: clone,
      encoding: "utf8",
      timeout: 300_000,
      env: { ...process.env, PLATFORM_CONFIG_DIR: join(dir, configDir) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    return { code: 0, out, err: "" };
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    return { code: e.status ?? -1, out: e.stdout ?? "", err: e.stderr ?? "" };
  }
}

test("quick start from a clean clone on free ports: run, walk through twice, Ctrl-C, start again", {
  timeout: 1_500_000,
}, async () => {
  const first = start();
  await first.ready;
  const printed = first.output();
  const secrets = JSON.parse(readFileSync(join(clone, ".data/secrets.json"), "utf8")) as { ownerPassword: string };
  for (const line of [
    `identity REST   http://127.0.0.1:${ports[0]}`,
    `identity gRPC   https://127.0.0.1:${ports[1]}`,
    `compute gRPC    https://127.0.0.1:${ports[2]}`,
    `agents REST     http://127.0.0.1:${ports[3]}`,
    `agents gRPC     https://127.0.0.1:${ports[4]}`,
    `runtime router  http://127.0.0.1:${ports[5]}`,
    "email     owner@example.com",
    `password  ${secrets.ownerPassword}`,
    "platform.mjs login --email owner@example.com",
  ]) {
    assert.ok(printed.includes(line), `prints ${JSON.stringify(line)}\n${printed}`);
  }
  const file = JSON.parse(readFileSync(join(clone, ".data/platform.json"), "utf8")) as {
    endpoints: Record<string, string>;
  };
  assert.equal(file.endpoints.router, `http://127.0.0.1:${ports[5]}`);
  assert.equal(file.endpoints.agentsGrpc, `https://127.0.0.1:${ports[4]}`);
  // The private CA and every service's certificate, keys readable by the owner only.
  for (const name of ["ca", "identity", "compute", "agents", "runtime-router", "runtime-worker", "operator"]) {
    assert.ok(existsSync(join(clone, `.data/tls/${name}.crt`)), `${name}.crt`);
    assert.equal(statSync(join(clone, `.data/tls/${name}.key`)).mode & 0o777, 0o600, `${name}.key`);
  }
  const caBefore = readFileSync(join(clone, ".data/tls/ca.crt"), "utf8");

  const blocks = walkthroughs();
  const all = [blocks.cli, blocks.curl, blocks.buf].join("\n");
  // Twice in a row, exactly as written: the second run must not trip over what the first made.
  for (const run of [1, 2]) {
    const { code, out, err } = sh(all, `cli-config-${run}`);
    assert.equal(code, 0, `walkthrough run ${run} failed (${code}):\n${out}\n${err}`);
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
      assert.ok(out.includes(expected), `walkthrough run ${run} prints ${JSON.stringify(expected)}\n${out}\n${err}`);
    }
  }

  assert.equal(await stop(first), 0, "Ctrl-C is a clean exit");
  await new Promise((r) => setTimeout(r, 2000));
  assert.deepEqual(leftovers(), [], "no process of the platform survives Ctrl-C");

  // With the platform down, the curl walkthrough stops at its first failing command, with curl's error.
  const down = sh(blocks.curl, "cli-config-down");
  assert.notEqual(down.code, 0, "the curl walkthrough fails when nothing answers");
  assert.equal(down.out, "", `nothing after the failed login runs:\n${down.out}`);
  assert.match(down.err, /curl: \(7\)/, down.err);

  const second = start();
  await second.ready;
  assert.ok(second.output().includes("unchanged since the first start"), second.output());
  assert.equal(readFileSync(join(clone, ".data/tls/ca.crt"), "utf8"), caBefore, "the second start reuses the CA");
  const again = execFileSync(
    "bash",
    [
      "-euo",
      "pipefail",
      "-c",
      `node packages/platform/bin/platform.mjs login --email owner@example.com --password '${secrets.ownerPassword}' && node packages/platform/bin/platform.mjs agents list`,
    ],
    { cwd: clone, encoding: "utf8", env: { ...process.env, PLATFORM_CONFIG_DIR: join(dir, "cli-config-2") } },
  );
  assert.match(again, /shell-\d+-\d+ {2}dev\/echo/, "the agents of the first run are still there");
  assert.equal(await stop(second), 0);
  await new Promise((r) => setTimeout(r, 2000));
  assert.deepEqual(leftovers(), []);
  assert.ok(existsSync(join(clone, ".data/identity")));
});
