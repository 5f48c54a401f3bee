// test-timeout: 600000
// `platform usage` and the budget flags of `agents create|update` (issue 20
// items 6 and 7), against identity, compute, agents and the router started
// by the test: a run of the dev model with a bash call in a real sandbox.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../testing/platform-stack.ts";

const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
let stack: PlatformStack;
let token: string;

type Result = { code: number | null; stdout: string; stderr: string };

function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { ...stack.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.stdin.end();
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function ok(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  const r = await run(args, env);
  assert.equal(r.code, 0, `platform ${args.join(" ")} → ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${stack.endpoints.agents}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, text: await res.text() };
}

before(
  async () => {
    stack = await startPlatform();
    await ok(["login", "--email", OWNER.email], { PLATFORM_PASSWORD: OWNER.password });
    const login = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(OWNER),
    });
    token = ((await login.json()) as { access_token: string }).access_token;
  },
  { timeout: 420_000 },
);
after(async () => {
  await stack?.stop();
});

describe("platform usage", () => {
  test("budgets from agents create/update; the usage table per session, agent and org, --json, bad flags", async () => {
    const created = JSON.parse(
      (await ok(["agents", "create", "--name", "Meter", "--model", "dev/echo", "--max-tool-calls", "1", "--json"]))
        .stdout,
    );
    assert.equal(created.budgets.maxToolCalls, 1);
    const session = JSON.parse((await api("POST", "/v1/sessions", { agentId: created.id })).text).id as string;
    // One bash call in a real sandbox, then the tool-calls budget ends the run before the next model call.
    const sent = await api("POST", `/v1/sessions/${session}/messages`, {
      messages: [{ role: "user", content: "run: echo metered" }],
    });
    assert.equal(sent.status, 200, sent.text);
    assert.match(sent.text, /"type":"budget_reached"/, sent.text);
    const refused = await api("POST", `/v1/sessions/${session}/messages`, {
      messages: [{ role: "user", content: "more" }],
    });
    assert.equal(refused.status, 429, refused.text);

    const table = await ok(["usage", "--session", session]);
    console.log(table.stdout);
    assert.match(table.stdout, /^MODEL +CALLS +INPUT +OUTPUT$/m);
    assert.match(table.stdout, /^dev\/echo +1 +\d+ +\d+$/m);
    assert.match(table.stdout, /tool calls: 1 /);
    assert.match(table.stdout, /budgets: 1 tool calls/);
    const json = JSON.parse((await ok(["usage", "--session", session, "--json"])).stdout);
    assert.equal(json.usage.toolCalls, 1);
    assert.equal(json.usage.modelCalls, 1);
    assert.ok(json.usage.inputTokens > 0);
    assert.ok(json.usage.sandboxWallMs > 0, `wall time from compute: ${JSON.stringify(json.usage)}`);
    console.log(`real compute: cpu ${json.usage.sandboxCpuMs} ms, wall ${json.usage.sandboxWallMs} ms`);

    const byAgent = JSON.parse((await ok(["usage", "--agent", "meter", "--since", "1h", "--json"])).stdout);
    assert.equal(byAgent.sessions, 1);
    assert.equal(byAgent.usage.toolCalls, 1);
    const future = JSON.parse(
      (
        await ok([
          "usage",
          "--agent",
          "meter",
          "--since",
          "2999-01-01T00:00:00Z",
          "--until",
          "2999-01-02T00:00:00Z",
          "--json",
        ])
      ).stdout,
    );
    assert.equal(future.usage.toolCalls, 0, "rows outside the range are left out");
    const org = await ok(["usage"]);
    assert.match(org.stdout, /^organization, .* session\(s\)$/m);
    assert.match(org.stdout, /^total +\d+ +\d+ +\d+$/m);

    const bad = await run(["usage", "--since", "yesterday"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--since must be RFC 3339/);
    const backwards = await run(["usage", "--since", "2026-02-01T00:00:00Z", "--until", "2026-01-01T00:00:00Z"]);
    assert.notEqual(backwards.code, 0);
    assert.match(backwards.stderr, /until must not be before since/);

    // Raising (here: removing) the budget lets the session go on.
    const updated = JSON.parse((await ok(["agents", "update", "meter", "--max-tool-calls", "0", "--json"])).stdout);
    assert.equal(updated.budgets.maxToolCalls, null);
    const again = await api("POST", `/v1/sessions/${session}/messages`, {
      messages: [{ role: "user", content: "hello" }],
    });
    assert.equal(again.status, 200, again.text);
    assert.match(again.text, /"type":"done"/);
  });
});
