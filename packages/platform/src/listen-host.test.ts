// test-timeout: 600000
// Nothing the launcher starts listens beyond PLATFORM_HOST. The platform runs
// on a loopback address other than 127.0.0.1, so a service that ignores the
// setting (or binds 0.0.0.0 / ::) shows up in the kernel's socket tables.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { seedEmbeddedDatabases } from "./testing/embedded-databases.ts";
import { freePort } from "./testing/platform-stack.ts";
import { ProcessGroup } from "./testing/process-group.ts";
import { processTree } from "./testing/process-tree.ts";

const root = new URL("../../..", import.meta.url).pathname;
const HOST = "127.0.0.3";
let dir: string;
let child: ChildProcess;
let exited: Promise<unknown>;
let output = "";

// Starting four services on PGlite takes a minute on a loaded 2-core machine: longer than the runner's default.
before(
  async () => {
    dir = mkdtempSync(join(tmpdir(), "listen-host-"));
    await seedEmbeddedDatabases(join(dir, "data"));
    const [identity, identityGrpc, compute, agents, agentsGrpc, router] = [
      await freePort(HOST),
      await freePort(HOST),
      await freePort(HOST),
      await freePort(HOST),
      await freePort(HOST),
      await freePort(HOST),
    ];
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("PLATFORM_") && k !== "DATABASE_URL" && k !== "HOST"),
    );
    child = spawn(process.execPath, ["packages/platform/bin/start.mjs"], {
      cwd: root,
      env: {
        ...env,
        PLATFORM_HOST: HOST,
        PLATFORM_DATA_DIR: join(dir, "data"),
        PLATFORM_IDENTITY_PORT: String(identity),
        PLATFORM_IDENTITY_GRPC_PORT: String(identityGrpc),
        PLATFORM_COMPUTE_PORT: String(compute),
        PLATFORM_AGENTS_PORT: String(agents),
        PLATFORM_AGENTS_GRPC_PORT: String(agentsGrpc),
        PLATFORM_ROUTER_PORT: String(router),
      },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    exited = new Promise((resolve) => child.on("exit", resolve));
    const deadline = Date.now() + 300_000;
    while (!output.includes("Ctrl-C stops everything.")) {
      if (child.exitCode !== null) throw new Error(`launcher exited (${child.exitCode}):\n${output.slice(-3000)}`);
      if (Date.now() > deadline) throw new Error(`launcher not up within 300 s:\n${output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  },
  { timeout: 360_000 },
);

after(
  async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      // Alive now, so the start time read here is the launcher's own.
      const group = new ProcessGroup(child.pid!);
      group.signal("SIGINT");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000).unref())]);
      group.signal("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  },
  { timeout: 120_000 },
);

type Listener = { address: string; port: number; inode: string };

/** LISTEN sockets of this network namespace, from /proc/net/tcp and tcp6. */
function listeners(): Listener[] {
  const out: Listener[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== "0A") continue;
      const [hex, portHex] = f[1]!.split(":");
      out.push({ address: decodeAddress(hex!), port: Number.parseInt(portHex!, 16), inode: f[9]! });
    }
  }
  return out;
}

function decodeAddress(hex: string): string {
  if (hex.length === 8) return [3, 2, 1, 0].map((i) => Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join(".");
  // IPv6: four little-endian 32-bit words.
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++)
    for (const i of [3, 2, 1, 0]) bytes.push(Number.parseInt(hex.slice(w * 8 + i * 2, w * 8 + i * 2 + 2), 16));
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff)
    return `::ffff:${bytes.slice(12).join(".")}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return groups.join(":");
}

/** Socket inodes held open by the given processes. */
function socketInodes(pids: number[]): Set<string> {
  const inodes = new Set<string>();
  for (const pid of pids) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {}
    }
  }
  return inodes;
}

async function wakeTenantWorker(endpoints: Record<string, string>): Promise<void> {
  const secrets = JSON.parse(readFileSync(join(dir, "data", "secrets.json"), "utf8")) as { ownerPassword: string };
  const post = async (url: string, body: unknown, token?: string) => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };
  const login = await post(`${endpoints.identity}/v1/auth/login`, {
    email: "owner@example.com",
    password: secrets.ownerPassword,
  });
  assert.equal(login.status, 200, login.text);
  const token = (JSON.parse(login.text) as { access_token: string }).access_token;
  const agent = await post(
    `${endpoints.agents}/v1/agents`,
    { name: "Listen", slug: "listen", model: "dev/echo" },
    token,
  );
  assert.equal(agent.status, 201, agent.text);
  const session = await post(
    `${endpoints.agents}/v1/sessions`,
    { agentId: (JSON.parse(agent.text) as { id: string }).id },
    token,
  );
  assert.equal(session.status, 201, session.text);
  const sessionId = (JSON.parse(session.text) as { id: string }).id;
  const invoke = await post(
    `${endpoints.router}/v1/sessions/${sessionId}/invoke`,
    { messages: [{ role: "user", content: "hello" }] },
    token,
  );
  assert.equal(invoke.status, 200, invoke.text);
  assert.match(invoke.text, /event: turn_done/);
}

test("every socket the launcher's processes listen on is bound to PLATFORM_HOST", { timeout: 400_000 }, async () => {
  const { endpoints } = JSON.parse(readFileSync(join(dir, "data", "platform.json"), "utf8")) as {
    endpoints: Record<string, string>;
  };
  // A tenant worker is a process of its own: wake one so its socket is counted too.
  await wakeTenantWorker(endpoints);

  const tree = processTree(child.pid!);
  const mine = socketInodes(tree);
  const listening = listeners().filter((l) => mine.has(l.inode));
  const shown = listening.map((l) => `${l.address}:${l.port}`).sort();

  const expected = Object.values(endpoints).map((u) => Number(new URL(u).port));
  for (const port of new Set(expected))
    assert.ok(
      listening.some((l) => l.port === port),
      `port ${port} of platform.json is listening (${shown.join(", ")})`,
    );
  // Six service ports plus at least one tenant worker.
  assert.ok(listening.length > new Set(expected).size, `a tenant worker listens too (${shown.join(", ")})`);
  for (const l of listening)
    assert.equal(l.address, HOST, `${l.address}:${l.port} is bound beyond PLATFORM_HOST=${HOST}`);
});
