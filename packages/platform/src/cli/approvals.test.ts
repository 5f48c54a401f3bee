// test-timeout: 600000
// Tool approvals from the command line (issue 20 item 7), against identity,
// compute, agents and the router started by the test: `agents create --ask`,
// and `platform chat` asking y/n on stdin when the run pauses.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../testing/platform-stack.ts";

const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
let stack: PlatformStack;
let token: string;

type Result = { code: number | null; stdout: string; stderr: string };

/** Runs the binary to its end, `input` on its stdin. */
function run(args: string[], input = "", env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { ...stack.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.stdin.end(input);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function ok(args: string[], input = "", env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const r = await run(args, input, env);
  assert.equal(r.code, 0, `platform ${args.join(" ")} → ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
async function api(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${stack.endpoints.agents}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status}`);
  return res.json();
}

before(
  async () => {
    stack = await startPlatform();
    await ok(["login", "--email", OWNER.email], "", { PLATFORM_PASSWORD: OWNER.password });
    const login = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(OWNER),
    });
    token = ((await login.json()) as { access_token: string }).access_token;
    // Wake the org's tenant worker once (its cold start is slow on a loaded machine).
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
      await new Promise((r) => setTimeout(r, 500));
    }
  },
  { timeout: 420_000 },
);
after(async () => {
  await stack?.stop();
});

describe("tool approvals", () => {
  test("agents create --ask (repeatable) sets the policies; agents update --allow changes one", async () => {
    const created = await ok(["agents", "create", "--name", "Gate", "--ask", "bash", "--ask", "write_file"]);
    assert.match(created.stdout, /asks before: bash, write_file/);
    const agent = await api("GET", "/v1/agents?limit=100").then(
      // biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
      (page) => page.items.find((a: any) => a.slug === "gate"),
    );
    assert.deepEqual(agent.toolPermissions, { bash: "ask", write_file: "ask" });
    const updated = await ok(["agents", "update", "gate", "--allow", "write_file", "--json"]);
    assert.deepEqual(JSON.parse(updated.stdout).toolPermissions, { bash: "ask", write_file: "allow" });
  });

  test("`yes | platform chat`: the pending call is shown, approved from stdin, runs, and the reply goes on", async () => {
    await ok(["agents", "create", "--name", "Asker", "--ask", "bash"]);
    const r = await ok(["chat", "--agent", "asker", "run: echo approved-here"], "y\ny\ny\n");
    assert.match(r.stderr, /⏸ bash \{"command":"echo approved-here"\}/, r.stderr);
    assert.match(r.stderr, /↳ \{"exitCode":0,"stdout":"approved-here\\n"\}/, r.stderr);
    assert.match(r.stdout, /The command exited with code 0/, r.stdout);
    const sessionId = /created session (\S+)/.exec(r.stderr)?.[1];
    const log = await api("GET", `/v1/sessions/${sessionId}`);
    // biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
    const types = log.events.map((e: any) => e.type).filter((t: string) => t !== "tool_output" && t !== "text");
    assert.deepEqual(types, ["user", "tool_use", "requires_action", "tool_result", "done"]);
  });

  test("a client tool's call: chat reads its result from stdin (never sends allow); !error gives a failed result", async () => {
    await api("POST", "/v1/agents", {
      name: "Picker",
      slug: "picker",
      model: "dev/echo",
      clientTools: [
        {
          name: "pick_color",
          description: "asks the user for a color",
          inputSchema: JSON.stringify({ type: "object", properties: { hint: { type: "string" } } }),
        },
      ],
    });
    const r = await ok(["chat", "--agent", "picker", '/call pick_color {"hint":"warm"}'], "dark orange\n");
    assert.match(r.stderr, /⏸ client tool pick_color \{"hint":"warm"\}/, r.stderr);
    assert.match(r.stdout, /dark orange/, r.stdout);
    const sessionId = /created session (\S+)/.exec(r.stderr)?.[1];
    const log = await api("GET", `/v1/sessions/${sessionId}`);
    // biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
    const result = log.events.find((e: any) => e.type === "tool_result");
    assert.equal(result.content, "dark orange");
    assert.equal(result.isError, false);
    const failed = await ok(["chat", "--agent", "picker", '/call pick_color {"hint":"none"}'], "!error no display\n");
    const failedId = /created session (\S+)/.exec(failed.stderr)?.[1];
    const failedLog = await api("GET", `/v1/sessions/${failedId}`);
    // biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
    const failedResult = failedLog.events.find((e: any) => e.type === "tool_result");
    assert.equal(failedResult.isError, true);
    assert.equal(failedResult.content, "no display");
  });

  test("`n <reason>` denies: nothing runs and the model gets the reason", async () => {
    await ok(["agents", "create", "--name", "Denier", "--ask", "bash"]);
    const r = await ok(["chat", "--agent", "denier", "run: echo never-run"], "n not on my machine\n");
    assert.match(r.stdout, /The tool failed: the user denied this tool call/, r.stdout);
    const sessionId = /created session (\S+)/.exec(r.stderr)?.[1];
    const log = await api("GET", `/v1/sessions/${sessionId}`);
    // biome-ignore lint/suspicious/noExplicitAny: untyped JSON answers
    const result = log.events.find((e: any) => e.type === "tool_result");
    assert.equal(result.isError, true);
    assert.match(result.content, /not on my machine/);
    assert.doesNotMatch(result.content, /exitCode/);
  });
});
