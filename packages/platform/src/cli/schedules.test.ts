// test-timeout: 600000
// `platform schedules` (issue 25) against identity, compute, agents and the
// router started by the test: a schedule created from the CLI fires on the
// agents service's real clock (its ticker, once a second) and its firing
// shows the session it created; list with next runs, pause, resume, rm,
// --json, and a refused cron or time zone.
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

describe("platform schedules", () => {
  test("create, list with next runs, a real firing, firings, pause, resume, rm, --json, bad input", async () => {
    await ok(["agents", "create", "--name", "Cron", "--model", "dev/echo"]);
    const created = JSON.parse(
      (
        await ok([
          "schedules",
          "create",
          "--agent",
          "cron",
          "--cron",
          "* * * * *",
          "--message",
          "scheduled hello",
          "--tz",
          "Europe/Berlin",
          "--json",
        ])
      ).stdout,
    );
    assert.equal(created.timeZone, "Europe/Berlin");
    assert.equal(created.target, "new_session");
    assert.equal(created.nextRuns.length, 5);
    const id = created.id as string;

    const list = await ok(["schedules", "list", "--agent", "cron", "--next", "2"]);
    console.log(list.stdout);
    assert.match(
      list.stdout,
      new RegExp(`^${id}  \\* \\* \\* \\* \\*  Europe/Berlin  enabled  new session each time  next \\S+Z, \\S+Z$`, "m"),
    );

    // The ticker fires the next minute's slot: wait for it (at most ~60 s plus a loaded machine's delay).
    const started = Date.now();
    let firings: Array<{ status: string; sessionId: string; slotTime: string }> = [];
    while (Date.now() - started < 150_000) {
      firings = JSON.parse((await ok(["schedules", "firings", id, "--json"])).stdout).items;
      if (firings.some((f) => f.status === "started")) break;
      await new Promise((r) => setTimeout(r, 2000));
    }
    console.log(`first firing seen after ${Date.now() - started} ms: ${JSON.stringify(firings)}`);
    const fired = firings.find((f) => f.status === "started");
    assert.ok(fired, JSON.stringify(firings));
    const text = await ok(["schedules", "firings", id]);
    assert.match(text.stdout, new RegExp(`^${fired.slotTime}  started  session ${fired.sessionId}$`, "m"));
    // The session it created ran the message.
    let events: Array<{ type: string; content?: string }> = [];
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${stack.endpoints.agents}/v1/sessions/${fired.sessionId}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      events = ((await res.json()) as { events: typeof events }).events;
      if (events.some((e) => e.type === "done")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(
      events.slice(0, 2).map((e) => [e.type, e.content]),
      [
        ["user", "scheduled hello"],
        ["text", "echo: scheduled hello"],
      ],
    );

    const paused = JSON.parse((await ok(["schedules", "pause", id, "--json"])).stdout);
    assert.equal(paused.enabled, false);
    assert.deepEqual(paused.nextRuns, []);
    assert.match((await ok(["schedules", "get", id])).stdout, /paused/);
    const resumed = await ok(["schedules", "resume", id]);
    assert.match(resumed.stdout, /^resumed schedule /m);
    assert.match(resumed.stdout, /next runs: \S+Z/);

    const badCron = await run(["schedules", "create", "--agent", "cron", "--cron", "every day", "--message", "x"]);
    assert.notEqual(badCron.code, 0);
    assert.match(badCron.stderr, /cron is not a valid cron expression/);
    const badZone = await run([
      "schedules",
      "create",
      "--agent",
      "cron",
      "--cron",
      "0 9 * * *",
      "--message",
      "x",
      "--tz",
      "Mars/Olympus",
    ]);
    assert.notEqual(badZone.code, 0);
    assert.match(badZone.stderr, /timeZone is not an IANA time zone/);
    const missing = await run(["schedules", "create", "--agent", "cron", "--message", "x"]);
    assert.equal(missing.code, 2, missing.stderr);

    await ok(["schedules", "rm", id]);
    const gone = await run(["schedules", "get", id]);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /not found/);
    const empty = JSON.parse((await ok(["schedules", "list", "--agent", "cron", "--json"])).stdout);
    assert.deepEqual(empty.items, []);
  });
});
