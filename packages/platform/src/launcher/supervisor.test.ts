// The supervisor on stand-in services (testing/fake-service.ts): restarts
// with backoff, gives up on a crash loop, routes logs; the real launcher with
// the real services is in supervision.test.ts.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { freePort } from "../testing/platform-stack.ts";
import type { RestartPolicy } from "./config.ts";
import { CrashHistory } from "./crash-history.ts";
import { consoleLine, ServiceLog } from "./service-log.ts";
import { probe, type ServiceSpec, Supervisor } from "./supervisor.ts";

const fake = new URL("../testing/fake-service.ts", import.meta.url).pathname;
const SECRET = "s3cret-owner-password-value";
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), "supervisor-"));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until<T>(
  what: string,
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 120_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function harness(policy: Partial<RestartPolicy>, logDir = join(dir, `logs-${Math.random()}`)) {
  const lines: string[] = [];
  const gaveUp: string[] = [];
  const supervisor = new Supervisor({
    log: (l) => lines.push(l),
    policy: {
      initialDelayMs: 100,
      maxDelayMs: 1000,
      healthyAfterMs: 60_000,
      maxCrashes: 5,
      windowMs: 600_000,
      ...policy,
    },
    serviceLog: (name) =>
      new ServiceLog(name, {
        level: "warn",
        dir: logDir,
        maxFileBytes: 1 << 20,
        secrets: [SECRET],
        console: (l) => lines.push(l),
      }),
    onGiveUp: (reason) => gaveUp.push(reason),
  });
  const spec = async (name: string, env: Record<string, string> = {}): Promise<ServiceSpec> => {
    const port = await freePort("127.0.0.1");
    return {
      name,
      entry: fake,
      readyUrl: `http://127.0.0.1:${port}/livez`,
      env: { FAKE_PORT: String(port), FAKE_SECRET: SECRET, ...env },
    };
  };
  return { supervisor, lines, gaveUp, spec, logDir };
}

test("restart backoff: doubles from the initial delay up to the cap, starts over after a healthy run, gives up at maxCrashes within the window", () => {
  const h = new CrashHistory({
    initialDelayMs: 500,
    maxDelayMs: 30_000,
    healthyAfterMs: 60_000,
    maxCrashes: 5,
    windowMs: 600_000,
  });
  const t = 1_000_000;
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => h.crashed(t + i * 1000)),
    [
      { giveUp: false, delayMs: 500, inWindow: 1, streak: 1 },
      { giveUp: false, delayMs: 1000, inWindow: 2, streak: 2 },
      { giveUp: false, delayMs: 2000, inWindow: 3, streak: 3 },
      { giveUp: false, delayMs: 4000, inWindow: 4, streak: 4 },
    ],
  );
  h.healthy();
  // The backoff starts over, the window still counts: the fifth crash within 10 minutes gives up.
  assert.deepEqual(h.crashed(t + 100_000), { giveUp: true, delayMs: 500, inWindow: 5, streak: 1 });
  // Crashes older than the window are forgotten.
  const late = new CrashHistory({
    initialDelayMs: 500,
    maxDelayMs: 30_000,
    healthyAfterMs: 60_000,
    maxCrashes: 2,
    windowMs: 10_000,
  });
  assert.equal(late.crashed(t).giveUp, false);
  assert.equal(late.crashed(t + 10_001).giveUp, false);
  assert.equal(late.crashed(t + 10_002).giveUp, true);
  // The cap.
  const capped = new CrashHistory({
    initialDelayMs: 500,
    maxDelayMs: 3000,
    healthyAfterMs: 60_000,
    maxCrashes: 99,
    windowMs: 1,
  });
  assert.deepEqual(
    Array.from({ length: 6 }, (_, i) => capped.crashed(t + i).delayMs),
    [500, 1000, 2000, 3000, 3000, 3000],
  );
});

test("a service killed with SIGKILL is started again while the other keeps answering; stopAll leaves nothing running", {
  timeout: 240_000,
}, async () => {
  const { supervisor, lines, gaveUp, spec } = await harness({});
  const a = await spec("alpha");
  const b = await spec("beta");
  await supervisor.start(a);
  await supervisor.start(b);
  const first = supervisor.status().alpha!.pid!;
  const other = supervisor.status().beta!.pid!;
  process.kill(first, "SIGKILL");
  await until("alpha restarting", () => supervisor.status().alpha!.state === "restarting");
  assert.equal(await probe(b.readyUrl), true, "beta answers while alpha is down");
  const back = await until("alpha back", async () => {
    const s = supervisor.status().alpha!;
    return s.state === "ready" && s.pid !== first && (await probe(a.readyUrl)) && s;
  });
  assert.equal(back.restarts, 1);
  assert.deepEqual(back.lastExit && { code: back.lastExit.code, signal: back.lastExit.signal }, {
    code: null,
    signal: "SIGKILL",
  });
  assert.equal(supervisor.status().beta!.pid, other, "beta was not touched");
  assert.ok(
    lines.some((l) =>
      /^platform: alpha exited \(signal SIGKILL\) after .*crash 1 of 5 allowed within 600 s; restarting it in 0\.1 s \(restart 1\)$/.test(
        l,
      ),
    ),
    lines.join("\n"),
  );
  assert.ok(
    lines.some((l) => l.startsWith("platform: alpha is back")),
    lines.join("\n"),
  );
  assert.deepEqual(gaveUp, []);

  const pids = [back.pid!, other];
  await supervisor.stopAll();
  assert.deepEqual(pids.filter(alive), [], "stopAll leaves no service running");
  assert.equal(supervisor.status().alpha!.state, "stopped");
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(supervisor.status().alpha!.pid, null, "and starts nothing again");
});

test("a service that crashes at once on every restart is given up on at maxCrashes, after growing delays", {
  timeout: 240_000,
}, async () => {
  const crashFile = join(dir, "broken");
  const { supervisor, lines, gaveUp, spec } = await harness({ initialDelayMs: 200, maxCrashes: 4 });
  const s = await spec("gamma", { FAKE_CRASH_FILE: crashFile });
  await supervisor.start(s);
  writeFileSync(crashFile, "");
  process.kill(supervisor.status().gamma!.pid!, "SIGKILL");
  await until("giving up", () => gaveUp.length > 0);
  assert.equal(gaveUp.length, 1);
  assert.match(
    gaveUp[0]!,
    /^gamma exited \(code 3\) after .*; crash 4 of 4 allowed within 600 s: giving up \(its log: .*gamma\.log\)$/,
  );
  const delays = lines.flatMap((l) => /^platform: gamma .*restarting it in ([\d.]+) s/.exec(l)?.[1] ?? []);
  assert.deepEqual(delays, ["0.2", "0.4", "0.8"], lines.join("\n"));
  assert.ok(
    lines.some((l) => l === "[gamma] fake: start-up failed: a setting is broken"),
    "the service's own words reach the console",
  );
  assert.equal(supervisor.status().gamma!.state, "failed");
  assert.equal(supervisor.status().gamma!.restarts, 3);
  await supervisor.stopAll();
});

test("a service outlives no launcher: when the supervisor is SIGKILLed its service stops (its stdin pipe closes)", {
  timeout: 60_000,
}, async () => {
  const port = await freePort("127.0.0.1");
  const host = spawn(
    process.execPath,
    ["--import", "tsx", new URL("../testing/supervisor-host.ts", import.meta.url).pathname],
    {
      env: { ...process.env, FAKE_PORT: String(port), LOG_DIR: join(dir, "orphan-logs") },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  host.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  const pid = Number((await until("the service started", () => /^ready (\d+)$/m.exec(out) ?? undefined, 45_000))[1]);
  assert.equal(await probe(`http://127.0.0.1:${port}/livez`), true);
  host.kill("SIGKILL");
  // The stand-in stops on SIGTERM, as the real services do (each drains on its own handler).
  await until("the service gone with its launcher", () => !alive(pid), 10_000);
});

test("a service that does not stop within the grace after SIGTERM is killed, and the launcher says so", {
  timeout: 60_000,
}, async () => {
  const { supervisor, lines, spec } = await harness({});
  await supervisor.start(await spec("stuck", { FAKE_IGNORE_TERM: "1" }));
  const pid = supervisor.status().stuck!.pid!;
  const started = Date.now();
  await supervisor.stopAll(500);
  assert.ok(Date.now() - started < 5000);
  assert.equal(alive(pid), false);
  assert.ok(lines.includes("platform: stuck did not stop within 0.5 s of SIGTERM; killing it"), lines.join("\n"));
});

test("logs: warnings, errors and plain lines on the console by default; every line in <service>.log; secrets in neither; the file is bounded", {
  timeout: 240_000,
}, async () => {
  const { supervisor, lines, spec, logDir } = await harness({});
  await supervisor.start(await spec("delta"));
  await until("the error line", () => lines.some((l) => l.startsWith("[delta] ERROR")));
  await until("the plain line", () => lines.some((l) => l === "[delta] a plain stderr line"));
  const shown = lines.filter((l) => l.startsWith("[delta]"));
  assert.deepEqual(
    shown.filter((l) => /DEBUG|INFO/.test(l)),
    [],
    "debug and info are not on the console by default",
  );
  assert.ok(shown.includes('[delta] WARN fake warning {"why":"disk almost full"}'), shown.join("\n"));
  assert.ok(shown.includes("[delta] ERROR fake error with [redacted]"), shown.join("\n"));
  await supervisor.stopAll();
  const file = readFileSync(join(logDir, "delta.log"), "utf8");
  for (const msg of [
    "fake debug detail",
    "fake listening",
    "fake warning",
    "fake error with [redacted]",
    "a plain stderr line",
  ]) {
    assert.ok(file.includes(msg), `${msg} in the file`);
  }
  assert.ok(!file.includes(SECRET) && !lines.join("\n").includes(SECRET), "the secret is nowhere");
  assert.equal(statSync(join(logDir, "delta.log")).mode & 0o777, 0o600);

  // The console level moves with the setting.
  assert.equal(consoleLine('{"level":20,"msg":"d"}', "warn"), undefined);
  assert.equal(consoleLine('{"level":20,"msg":"d"}', "debug"), "DEBUG d");
  assert.equal(consoleLine('{"level":30,"msg":"i","k":1}', "info"), 'INFO i {"k":1}');

  // 3,000 lines of ~150 bytes through a 64 KiB bound: the file and its one predecessor, each within the bound.
  const bounded = mkdtempSync(join(dir, "bounded-"));
  const small = new Supervisor({
    log: () => {},
    policy: { initialDelayMs: 100, maxDelayMs: 1000, healthyAfterMs: 60_000, maxCrashes: 5, windowMs: 600_000 },
    serviceLog: (name) =>
      new ServiceLog(name, { level: "error", dir: bounded, maxFileBytes: 65_536, secrets: [], console: () => {} }),
    onGiveUp: () => {},
  });
  const bulky = await spec("bulky", { FAKE_BULK: "3000" });
  await small.start(bulky);
  await until(
    "the bulk written",
    () =>
      existsSync(join(bounded, "bulky.log.1")) &&
      readFileSync(join(bounded, "bulky.log"), "utf8").includes("bulk 2999"),
  );
  await small.stopAll();
  assert.ok(statSync(join(bounded, "bulky.log")).size <= 65_536);
  assert.ok(statSync(join(bounded, "bulky.log.1")).size <= 65_536);
  assert.ok(statSync(join(bounded, "bulky.log.1")).size > 60_000, "rotated when full, not before");
});
