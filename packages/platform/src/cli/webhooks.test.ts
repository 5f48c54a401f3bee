// test-timeout: 600000
// `platform webhooks` (issue 25) against identity, compute, agents and the
// router started by the test: an endpoint created from the CLI (its secret
// printed once), a session run through the agents service, and its
// session.idle reaching the ten-line receiver of identity's README, run as
// written, which verifies the signature with `standardwebhooks`. The event
// goes agents' log → trigger → relay → identity's internal publish → outbox →
// delivery worker → receiver. Then the delivery log, list without the
// secret, rotate-secret, disable, rm, and refused input.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { freePort, OWNER, type PlatformStack, startPlatform } from "../testing/platform-stack.ts";

const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
const identityDir = new URL("../../../identity/", import.meta.url).pathname;
let stack: PlatformStack;
let token: string;
let receiver: ChildProcess | undefined;

type Result = { code: number | null; stdout: string; stderr: string };

function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...stack.env, ...env }, stdio: "pipe" });
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

/** The README's receiver, exactly the ```js block under "Webhooks (issue 25)". */
function readmeReceiver(): string {
  const readme = readFileSync(`${identityDir}README.md`, "utf8");
  const section = readme.slice(readme.indexOf("## Webhooks (issue 25)"));
  const block = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, "identity's README has the receiver block");
  assert.equal(block.trimEnd().split("\n").length, 10, "the receiver is ten lines");
  return block;
}

before(
  async () => {
    // The test's receiver is on 127.0.0.1, which identity refuses by default.
    stack = await startPlatform({ env: { WEBHOOKS_ALLOW_PRIVATE_TARGETS: "1" } });
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
  receiver?.kill();
  await stack?.stop();
});

describe("platform webhooks", () => {
  test("a session run's session.idle reaches the README's receiver, verified; the CLI manages the endpoint", async () => {
    const port = await freePort("127.0.0.1");
    const created = JSON.parse(
      (
        await ok([
          "webhooks",
          "create",
          "--url",
          `http://127.0.0.1:${port}/hook`,
          "--events",
          "session.idle,run.failed",
          "--json",
        ])
      ).stdout,
    );
    assert.match(created.secret, /^whsec_/);
    assert.deepEqual(created.event_types, ["session.idle", "run.failed"]);
    const id = created.id as string;
    const human = await ok(["webhooks", "create", "--url", "https://hooks.example.com/x", "--events", "member.added"]);
    assert.match(human.stdout, /signing secret \(shown once, keep it\): whsec_/);

    // The README's receiver, as written, with the secret the CLI printed.
    let out = "";
    receiver = spawn(process.execPath, ["--input-type=module", "-e", readmeReceiver()], {
      cwd: identityDir,
      env: { ...process.env, WEBHOOK_SECRET: created.secret, PORT: String(port) },
      stdio: "pipe",
    });
    receiver.stdout!.on("data", (c: Buffer) => (out += c.toString()));
    receiver.stderr!.on("data", (c: Buffer) => (out += c.toString()));

    // A run through the agents service.
    const agent = JSON.parse(
      (await ok(["agents", "create", "--name", "Hooked", "--model", "dev/echo", "--json"])).stdout,
    );
    const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const session = (await (
      await fetch(`${stack.endpoints.agents}/v1/sessions`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ agentId: agent.id }),
      })
    ).json()) as { id: string };
    const started = Date.now();
    const send = await fetch(`${stack.endpoints.agents}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ messages: [{ role: "user", content: "hello hooks" }] }),
    });
    assert.equal(send.status, 200);
    await send.text();
    const deadline = Date.now() + 90_000;
    while (!out.includes("session.idle") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    console.log(`run end → verified at the receiver: ${Date.now() - started} ms`);
    const lineOut = out.split("\n").find((l) => l.startsWith("session.idle "));
    assert.ok(lineOut, `the receiver printed no session.idle:\n${out}\n${stack.logs().slice(-3000)}`);
    const data = JSON.parse(lineOut.slice("session.idle ".length));
    assert.equal(data.session_id, session.id);
    assert.equal(data.agent_id, agent.id);

    const log = JSON.parse((await ok(["webhooks", "deliveries", id, "--json"])).stdout);
    const idle = log.items.find((d: { event_type: string }) => d.event_type === "session.idle");
    assert.equal(idle.status, "succeeded");
    assert.equal(idle.attempts.at(-1).status_code, 204);
    assert.match(
      (await ok(["webhooks", "deliveries", id])).stdout,
      /session\.idle {2}succeeded {2}1 attempt\(s\), last HTTP 204/,
    );

    // The secret is never shown again.
    const listed = await ok(["webhooks", "list", "--json"]);
    assert.ok(!listed.stdout.includes(created.secret.slice(6)));
    assert.ok(JSON.parse(listed.stdout).some((w: { id: string }) => w.id === id));
    assert.ok(!(await ok(["webhooks", "get", id, "--json"])).stdout.includes(created.secret.slice(6)));

    // Redelivery: the same message again, verified again.
    const before = out.split("session.idle").length;
    await ok(["webhooks", "redeliver", id, idle.id]);
    const until = Date.now() + 30_000;
    while (out.split("session.idle").length === before && Date.now() < until)
      await new Promise((r) => setTimeout(r, 200));
    assert.equal(out.split("session.idle").length, before + 1, "redelivered and verified");

    const rotated = JSON.parse((await ok(["webhooks", "rotate-secret", id, "--json"])).stdout);
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, created.secret);
    assert.ok(rotated.previous_secret_expires_at);
    const disabled = JSON.parse((await ok(["webhooks", "disable", id, "--json"])).stdout);
    assert.equal(disabled.enabled, false);

    const bad = await run(["webhooks", "create", "--url", "not a url", "--events", "session.idle"]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /url/);
    const badType = await run(["webhooks", "create", "--url", "https://x.example.com", "--events", "session.exploded"]);
    assert.notEqual(badType.code, 0);
    assert.match(badType.stderr, /event_types/);

    await ok(["webhooks", "rm", id]);
    const gone = await run(["webhooks", "get", id]);
    assert.notEqual(gone.code, 0);
  });
});
