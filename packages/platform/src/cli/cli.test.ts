// test-timeout: 600000
// The `platform` binary as a user runs it, against identity, compute,
// agents and the router started by the test: flags and exit codes, pages,
// pipes, chat (tool calls every time, live tool output, Ctrl-C), sessions,
// status and shell completion.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../testing/platform-stack.ts";

const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
let stack: PlatformStack;

type Result = { code: number | null; stdout: string; stderr: string };

/** Runs the binary to its end. */
function run(args: string[], options: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { ...stack?.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.stdin.end(options.input ?? "");
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function ok(args: string[], options: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<Result> {
  const r = await run(args, options);
  assert.equal(r.code, 0, `platform ${args.join(" ")} → ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** A running binary whose stderr lines are kept with the time each arrived. */
function watch(args: string[]): {
  child: ChildProcess;
  lines: Array<{ at: number; text: string }>;
  stdout: () => string;
  exit: Promise<number | null>;
} {
  const child = spawn(process.execPath, [bin, ...args], { env: stack.env, stdio: ["ignore", "pipe", "pipe"] });
  const lines: Array<{ at: number; text: string }> = [];
  let partial = "";
  let stdout = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => {
    const parts = (partial + c.toString()).split("\n");
    partial = parts.pop() ?? "";
    for (const text of parts) lines.push({ at: Date.now(), text });
  });
  const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, lines, stdout: () => stdout, exit };
}

/** A proxy to `target` that holds every session events stream (GET .../events) for `delayMs` before forwarding it. */
async function slowEventsProxy(target: string, delayMs: number): Promise<{ url: string; close(): void }> {
  const server = http.createServer((req, res) => {
    const forward = () => {
      const upstream = http.request(
        new URL(req.url ?? "/", target),
        { method: req.method, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    };
    if (req.method === "GET" && /\/events(\?|$)/.test(req.url ?? "")) setTimeout(forward, delayMs);
    else forward();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

let token: string;

/** The REST API directly, for a test's setup and checks (so they do not depend on the CLI under test). */
// biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
async function api(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${stack.endpoints.agents}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status}`);
  return res.status === 204 ? undefined : res.json();
}

before(
  async () => {
    stack = await startPlatform();
    await ok(["login", "--email", OWNER.email], { env: { PLATFORM_PASSWORD: OWNER.password } });
    const login = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(OWNER),
    });
    token = ((await login.json()) as { access_token: string }).access_token;
    // Wake the org's tenant worker once (its cold start is slow on a loaded machine), so each chat test measures the chat.
    const agent = (await api("POST", "/v1/agents", { name: "Warm", slug: "warm", model: "dev/echo" })).id;
    const session = (await api("POST", "/v1/sessions", { agentId: agent })).id;
    const deadline = Date.now() + 240_000;
    for (;;) {
      const res = await fetch(`${stack.endpoints.router}/v1/sessions/${session}/invoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "warm up" }] }),
      });
      const body = await res.text();
      if (res.status === 200 && body.includes("turn_done")) break;
      if (Date.now() > deadline)
        throw new Error(`the tenant worker did not wake: ${res.status} ${body}\n${stack.logs()}`);
    }
  },
  { timeout: 420_000 },
);
after(async () => {
  await stack?.stop();
});

describe("command line", () => {
  test("--version, --help and per-command --help exit 0", async () => {
    assert.match((await ok(["--version"])).stdout, /^platform \d+\.\d+\.\d+\n$/);
    assert.match(JSON.parse((await ok(["--version", "--json"])).stdout).version, /^\d+\.\d+\.\d+$/);
    assert.match((await ok(["--help"])).stdout, /Exit codes:\n {2}0 /);
    const help = (await ok(["agents", "list", "--help"])).stdout;
    assert.match(help, /^usage: platform agents list \[--limit <n>\] \[--after <cursor>\]/);
    assert.match((await ok(["help", "sessions", "list"])).stdout, /--agent <id\|slug>/);
    assert.match((await ok(["sessions", "--help"])).stdout, /platform sessions delete <session id>/);
  });

  test("unknown flags, unknown commands and missing or extra arguments exit 2 with the command's usage", async () => {
    for (const args of [
      ["agents", "list", "--bogus"],
      ["agents", "create", "--name"],
      ["agents", "get"],
      ["sessions", "get", "a", "b"],
      ["frobnicate"],
      ["agents", "explode"],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, /^error: /);
      assert.match(r.stderr, /usage:/);
      assert.equal(r.stdout, "");
    }
    const missing = await run(["agents", "create"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--name is required[\s\S]*usage: platform agents create --name <name>/);
    const json = await run(["agents", "list", "--bogus", "--json"]);
    assert.equal(json.code, 2);
    assert.equal(JSON.parse(json.stderr).error.exitCode, 2);
  });

  test("an API error exits 1; --json prints it as an object on stderr", async () => {
    const r = await run(["agents", "get", "00000000-0000-4000-8000-000000000000", "--json"]);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stderr).error.code, "not_found");
    assert.equal(JSON.parse(r.stderr).error.status, 404);
  });
});

describe("agents and sessions", () => {
  test("agents list --after sends the cursor: the `more` hints walk every page once and end", async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++)
      made.push((await api("POST", "/v1/agents", { name: `Pager ${i}`, slug: `pager-${i}`, model: "dev/echo" })).id);
    const seen: string[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const r = await ok(["agents", "list", "--limit", "1", ...(after ? ["--after", after] : [])]);
      seen.push(
        ...r.stdout
          .trim()
          .split("\n")
          .map((l) => l.split(/\s+/)[0]!),
      );
      after = /\(more: --after (\S+)\)/.exec(r.stderr)?.[1];
      if (!after) break;
    }
    assert.equal(after, undefined, "the hints end");
    assert.equal(new Set(seen).size, seen.length, "no agent twice");
    for (const id of made) assert.ok(seen.includes(id));
    const page = JSON.parse((await ok(["agents", "list", "--limit", "2", "--json"])).stdout);
    assert.deepEqual(Object.keys(page).sort(), ["items", "next"]);
    const next = JSON.parse((await ok(["agents", "list", "--limit", "2", "--after", page.next, "--json"])).stdout);
    assert.ok(!next.items.some((a: { id: string }) => page.items.some((b: { id: string }) => a.id === b.id)));
  });

  test("agents update and delete; sessions create, list [--agent], get and delete", async () => {
    const agent = JSON.parse((await ok(["agents", "create", "--name", "Keeper", "--json"])).stdout);
    const updated = JSON.parse((await ok(["agents", "update", "keeper", "--model", "dev/other", "--json"])).stdout);
    assert.equal(updated.model, "dev/other");
    assert.equal(updated.id, agent.id);
    const s1 = JSON.parse((await ok(["sessions", "create", "keeper", "--json"])).stdout);
    const s2 = JSON.parse((await ok(["sessions", "create", agent.id, "--json"])).stdout);
    const other = JSON.parse((await ok(["agents", "create", "--name", "Other", "--json"])).stdout);
    const s3 = JSON.parse((await ok(["sessions", "create", other.id, "--json"])).stdout);
    const mine = JSON.parse((await ok(["sessions", "list", "--agent", "keeper", "--json"])).stdout);
    assert.deepEqual(
      mine.items.map((s: { id: string }) => s.id),
      [s2.id, s1.id],
    );
    const all = (await ok(["sessions", "list", "--limit", "100"])).stdout;
    for (const s of [s1, s2, s3]) assert.match(all, new RegExp(`^${s.id}  agent `, "m"));
    await ok(["sessions", "delete", s1.id]);
    assert.equal((await run(["sessions", "get", s1.id])).code, 1);
    await ok(["agents", "delete", "keeper"]);
    assert.equal((await run(["agents", "get", agent.id])).code, 1);
    // Its sessions stay readable, and listable by the agent's id.
    assert.equal(JSON.parse((await ok(["sessions", "get", s2.id, "--json"])).stdout).session.id, s2.id);
    assert.deepEqual(
      JSON.parse((await ok(["sessions", "list", "--agent", agent.id, "--json"])).stdout).items.map(
        (s: { id: string }) => s.id,
      ),
      [s2.id],
    );
  });
});

describe("deleting a session with a sandbox", () => {
  test("sessions delete destroys its sandbox in compute (DESTROYED: the workspace is in its grace window)", async () => {
    const agent = (await api("POST", "/v1/agents", { name: "Sandboxed", slug: "sandboxed", model: "dev/echo" })).id;
    const session = (await api("POST", "/v1/sessions", { agentId: agent })).id as string;
    await ok(["chat", session, "run: echo in-the-sandbox > kept.txt"]);
    const sandboxId = (await api("GET", `/v1/sessions/${session}`)).session.sandboxId as string;
    assert.ok(sandboxId, "the tool call made the session's sandbox");
    const describe = async () => {
      const res = await fetch(`${stack.endpoints.computeGrpc}/compute.v1.ComputeService/DescribeSandbox`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ sandboxId }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      return ((await res.json()) as { status: string }).status;
    };
    assert.notEqual(await describe(), "SANDBOX_STATUS_DESTROYED");
    await ok(["sessions", "delete", session]);
    assert.equal(await describe(), "SANDBOX_STATUS_DESTROYED");
    assert.equal((await run(["sessions", "get", session])).code, 1);
  });
});

describe("pipes", () => {
  test("a reader that goes away (| head) ends the command quietly with status 0", async () => {
    const child = spawn(process.execPath, [bin, "agents", "list"], {
      env: stack.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.destroy(); // the reader is gone before the first line
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(code, 0);
    assert.equal(stderr, "", "no EPIPE stack trace");
    const shell = execFileSync("bash", ["-o", "pipefail", "-c", `node ${bin} --help | head -1; echo "status $?"`], {
      env: stack.env,
    }).toString();
    assert.match(shell, /^platform: .*\nstatus 0\n$/);
  });

  test("a just-created API key is the first line, so `| head -1` keeps it", async () => {
    const out = execFileSync(
      "bash",
      ["-o", "pipefail", "-c", `node ${bin} api-keys create --name piped | head -1; echo "status $?"`],
      {
        env: stack.env,
        stdio: ["ignore", "pipe", "pipe"],
      },
    ).toString();
    assert.match(out, /^key: sk_(live|test)_\S+\nstatus 0\n$/);
  });
});

describe("api-keys", () => {
  test("--scope gathers repeated and comma-separated scopes; without it the key has all but admin", async () => {
    const scoped = JSON.parse(
      (
        await ok([
          "api-keys",
          "create",
          "--name",
          "scoped",
          "--scope",
          "read",
          "--scope",
          "sessions:run,agents:write",
          "--json",
        ])
      ).stdout,
    );
    assert.deepEqual(scoped.scopes, ["read", "agents:write", "sessions:run"]);
    const full = JSON.parse((await ok(["api-keys", "create", "--name", "full", "--json"])).stdout);
    assert.deepEqual(full.scopes, ["read", "agents:write", "sessions:run"]);
    const bad = await run(["api-keys", "create", "--name", "bad", "--scope", "everything"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /unknown scope/);
  });
});

describe("chat", () => {
  test("tool calls and their results are shown on every turn, also when the events stream is slower than the reply", async () => {
    const agent = (await api("POST", "/v1/agents", { name: "Tools", slug: "tools", model: "dev/echo" })).id;
    const session = (await api("POST", "/v1/sessions", { agentId: agent })).id as string;
    // The session's events reach the CLI 1.5 s late (a slow link), so the
    // reply through the router ends first: the tool round must still show.
    const proxy = await slowEventsProxy(stack.endpoints.agents, 1500);
    try {
      for (let i = 0; i < 4; i++) {
        const r = await ok(
          ["chat", session, `run: echo turn-${i}`],
          i % 2 ? {} : { env: { PLATFORM_AGENTS_URL: proxy.url } },
        );
        assert.match(
          r.stderr,
          new RegExp(`⚙ \\{"name":"bash","input":\\{"command":"echo turn-${i}"\\}\\}`),
          `turn ${i}: tool call shown\n${r.stderr}`,
        );
        assert.match(
          r.stderr,
          new RegExp(`↳ \\{"exitCode":0,"stdout":"turn-${i}\\\\n"\\}`),
          `turn ${i}: result shown\n${r.stderr}`,
        );
        assert.match(r.stdout, /The command exited with code 0/);
      }
    } finally {
      proxy.close();
    }
  });

  test("a running tool's output is shown live on stderr, before its result", async () => {
    const w = watch(["chat", "--agent", "pager-1", "run: for i in 1 2 3 4 5; do echo tick $i; sleep 0.2; done"]);
    assert.equal(await w.exit, 0, w.lines.map((l) => l.text).join("\n"));
    const tick1 = w.lines.find((l) => l.text === "│ tick 1");
    const tick5 = w.lines.find((l) => l.text === "│ tick 5");
    const result = w.lines.find((l) => l.text.startsWith("↳ "));
    assert.ok(tick1 && tick5 && result, w.lines.map((l) => l.text).join("\n"));
    assert.ok(result.at - tick1.at >= 500, `tick 1 shown ${result.at - tick1.at} ms before the result`);
    assert.ok(tick5.at <= result.at);
  });

  test("--json prints one event per line, tool_output included", async () => {
    const r = await ok(["chat", "--agent", "pager-2", "run: echo json-out", "--json"]);
    const events = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; seq?: number });
    assert.equal(events[0]!.type, "session_created");
    const types = events.slice(1).map((e) => e.type);
    assert.deepEqual(
      types.filter((t) => t !== "text"),
      ["user", "tool_use", "tool_output", "tool_result", "done"],
    );
  });

  test("Ctrl-C cancels the run and exits 130", async () => {
    const session = (
      await api("POST", "/v1/sessions", { agentId: (await api("GET", "/v1/agents?limit=1")).items[0].id })
    ).id as string;
    const w = watch(["chat", session, "run: sleep 60"]);
    await until(() => w.lines.some((l) => l.text.startsWith("⚙ ")), 60_000, "the tool call");
    const sent = Date.now();
    w.child.kill("SIGINT");
    assert.equal(await w.exit, 130, w.lines.map((l) => l.text).join("\n"));
    assert.ok(Date.now() - sent < 10_000);
    assert.ok(
      w.lines.some((l) => l.text === "cancelled"),
      w.lines.map((l) => l.text).join("\n"),
    );
    const log = (await api("GET", `/v1/sessions/${session}`)) as {
      session: { status: string };
      events: Array<{ type: string; content?: string }>;
    };
    assert.equal(log.session.status, "idle");
    assert.deepEqual(log.events.at(-1), { ...log.events.at(-1), type: "error", content: "the run was cancelled" });
  });
});

describe("status and completion", () => {
  test("status: every endpoint of platform.json is ready, with its version; a dead one exits 1", async () => {
    const r = await ok(["status", "--json"]);
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      services: Array<{ name: string; url: string; ready: boolean; version: string | null }>;
    };
    assert.equal(report.ok, true);
    assert.deepEqual(report.services.map((s) => s.url).sort(), Object.values(stack.endpoints).sort());
    assert.ok(report.services.every((s) => s.ready));
    assert.ok(
      report.services.every((s) => /^\d+\.\d+\.\d+$/.test(s.version ?? "")),
      JSON.stringify(report.services),
    );
    const human = await ok(["status"]);
    assert.match(human.stdout, /✓ agents REST/);
    const down = await run(["status"], { env: { PLATFORM_ROUTER_URL: "http://127.0.0.1:9" } });
    assert.equal(down.code, 1);
    assert.match(down.stdout, /✗ runtime router +http:\/\/127\.0\.0\.1:9 +unreachable/);
  });

  test("completion: bash completes commands, actions and flags; zsh registers _platform", async () => {
    const script = join(stack.dataDir, "completion.bash");
    writeFileSync(script, (await ok(["completion", "bash"])).stdout);
    const complete = (words: string[]) =>
      execFileSync("bash", [
        "-c",
        `source ${script}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _platform; echo "\${COMPREPLY[*]}"`,
      ])
        .toString()
        .trim();
    assert.equal(complete(["platform", "sess"]), "sessions");
    assert.equal(complete(["platform", "agents", "up"]), "update");
    assert.equal(complete(["platform", "agents", "list", "--a"]), "--after");
    assert.equal(complete(["platform", "sessions", "--ag"]), "--agent");
    assert.equal(complete(["platform", "completion", ""]), "bash zsh");
    assert.equal(complete(["platform", "files", "up"]), "upload");
    assert.equal(complete(["platform", "files", "ls", "--r"]), "--recursive");
    const zsh = (await ok(["completion", "zsh"])).stdout;
    assert.match(zsh, /^#compdef platform\n/);
    // zsh itself (scripts/setup.sh installs it) loads the script under compinit; compadd is
    // replaced by a recorder, since completing needs an interactive line editor.
    const zshScript = join(stack.dataDir, "_platform");
    writeFileSync(zshScript, zsh);
    const zshComplete = (words: string[]) =>
      execFileSync("zsh", [
        "-c",
        `autoload -U compinit && compinit -u -d ${join(stack.dataDir, "zcompdump")}; source ${zshScript}; compadd() { print -r -- "\${@:#--}"; }; _files() { print FILES; }; words=(${words.map((w) => `'${w}'`).join(" ")}); CURRENT=${words.length}; _platform`,
      ])
        .toString()
        .trim();
    assert.match(
      zshComplete(["platform", "sess"]),
      // `usage` (issue 20), `schedules` and `webhooks` (issue 25), `images`: each while its change lands.
      /^login logout whoami status api-keys agents sessions files chat members invitations orgs (usage )?(schedules )?(images )?(webhooks )?users completion help/,
    );
    assert.equal(zshComplete(["platform", "agents", "up"]), "list create get update delete");
    assert.equal(zshComplete(["platform", "files", "d"]), "ls upload download");
    assert.equal(zshComplete(["platform", "files", "ls", "--r"]), "--recursive --json --help");
    assert.equal(zshComplete(["platform", "sessions", "--ag"]), "--agent --limit --after --json --help");
    assert.equal(zshComplete(["platform", "agents", "list", "--a"]), "--limit --after --json --help");
    assert.equal(JSON.parse((await ok(["completion", "zsh", "--json"])).stdout).script, zsh);
    assert.equal((await run(["completion", "fish"])).code, 2);
  });
});
