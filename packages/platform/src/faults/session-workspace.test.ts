// test-timeout: 1200000
// Issue 18's "Done when", end to end on the real launcher (`bash
// scripts/run.sh`, embedded PGlite): a session on the dev model writes a file
// through a tool call; its sandbox reaches max_runtime (AGENTS_SANDBOX_MAX_RUNTIME_MS,
// short here) and ends; the next tool call (in a new sandbox) reads the file
// back, and so does the files API. Then the same across a restart of the
// launcher (Ctrl-C, start again on the same ports and data directory),
// RESTART_ROUNDS times (default 1; the flake hunt of issue 18 ran 20).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { call, runToDone, type SeenEvent, User } from "./client.ts";
import { FaultPlatform, progress, waitFor } from "./harness.ts";

const MAX_RUNTIME_MS = 20_000;
const ROUNDS = Number(process.env.RESTART_ROUNDS ?? "1");

let platform: FaultPlatform;
let owner: User;
let agentId: string;

test.before(
  async () => {
    platform = await FaultPlatform.start({ env: { AGENTS_SANDBOX_MAX_RUNTIME_MS: String(MAX_RUNTIME_MS) } });
    owner = await User.login(platform.endpoints, platform.ownerEmail, platform.ownerPassword);
    agentId = await owner.agent();
  },
  { timeout: 480_000 },
);
test.after(() => platform?.destroy(), { timeout: 120_000 });

/** The stdout of a completed `run:`, from its tool result (`{"exitCode", "stdout"}`, as the model saw it). */
async function toolRun(session: string, command: string, events?: SeenEvent[]): Promise<string> {
  const { stream } = await runToDone(owner, session, `run: ${command}`, 240_000);
  events?.push(...stream.events);
  const result = stream.events.find((e) => e.type === "tool_result");
  assert.ok(result && !result.isError, `run: ${command} → ${JSON.stringify(stream.events)}`);
  return (JSON.parse(result.content ?? "{}") as { stdout?: string }).stdout ?? "";
}

async function sandboxOf(session: string): Promise<string> {
  const id = (await owner.stored(session)).session.sandboxId;
  assert.ok(id, "the session has a sandbox");
  return id;
}

/** The platform's processes that run inside the sandbox (its cgroup carries the sandbox's id). */
function sandboxProcesses(sandboxId: string): number[] {
  return platform.processes().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cgroup`, "utf8").includes(sandboxId);
    } catch {
      return false;
    }
  });
}

/** A file of the session's workspace through the files API (REST), as text. */
async function readThroughApi(session: string, path: string): Promise<string> {
  const a = await call<{ data?: string; eof?: boolean }>(
    "GET",
    `${platform.endpoints.agents}/v1/sessions/${session}/files:read?path=${encodeURIComponent(path)}`,
    { token: owner.token },
  );
  assert.equal(a.status, 200, JSON.stringify(a.body));
  assert.equal(a.body.eof, true);
  return Buffer.from(a.body.data ?? "", "base64").toString();
}

test("a file written by a tool call survives its sandbox's max_runtime: the next tool call, in a new sandbox, reads it", {
  timeout: 600_000,
}, async () => {
  const session = await owner.session(agentId);
  const token = `kept-${randomUUID()}`;
  await toolRun(session, `mkdir -p notes && echo ${token} > notes/a.txt && chmod 640 notes/a.txt`);
  const first = await sandboxOf(session);
  assert.ok(sandboxProcesses(first).length > 0, "the sandbox's processes are found by its cgroup");
  // max_runtime ends the sandbox: its processes go.
  const { ms } = await waitFor(
    "the sandbox ended at its max_runtime",
    () => sandboxProcesses(first).length === 0,
    MAX_RUNTIME_MS + 180_000,
    500,
  );
  progress(`sandbox ${first} ended ${ms} ms after the write`);
  const events: SeenEvent[] = [];
  const out = await toolRun(session, "cat notes/a.txt && stat -c %a notes/a.txt", events);
  assert.match(out, new RegExp(`${token}\\n640`));
  const second = await sandboxOf(session);
  assert.notEqual(second, first, "the tool call ran in a new sandbox");
  // The session's log says so, for a client to show (the model does not see it).
  const replaced = events.filter((e) => e.type === "sandbox_replaced");
  assert.equal(replaced.length, 1, JSON.stringify(events));
  assert.deepEqual(JSON.parse(replaced[0]!.content ?? "{}"), {
    previousSandboxId: first,
    sandboxId: second,
    reason: "failed",
  });
  assert.equal(await readThroughApi(session, "notes/a.txt"), `${token}\n`);
});

test(`files written before a launcher restart are read back after it (${ROUNDS} round(s))`, {
  timeout: Math.max(1_100_000, ROUNDS * 300_000),
}, async () => {
  const session = await owner.session(agentId);
  const written: string[] = [];
  const missing: string[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const token = `round-${round}-${randomUUID()}`;
    await toolRun(session, `mkdir -p rounds && echo ${token} > rounds/${round}.txt`);
    written.push(token);
    const stopped = await platform.stop(120_000);
    assert.equal(stopped, 0, `the launcher stopped cleanly\n${platform.logs(60)}`);
    const startMs = await platform.launch();
    progress(`round ${round}: launcher up again in ${startMs} ms`);
    owner = await User.login(platform.endpoints, platform.ownerEmail, platform.ownerPassword);
    // Every file of every round so far, through a tool call of the session (one `cat` each, so a missing one is named).
    const out = await toolRun(session, `for i in $(seq 1 ${round}); do echo "$i:$(cat rounds/$i.txt 2>&1)"; done`);
    for (let i = 1; i <= round; i++) {
      if (!out.includes(`${i}:${written[i - 1]}`))
        missing.push(`round ${round}: rounds/${i}.txt → ${out.split("\n").find((l) => l.startsWith(`${i}:`))}`);
    }
    progress(`round ${round}: ${missing.length} missing so far`);
    if (missing.length > 0) break;
  }
  assert.deepEqual(missing, [], `files lost across a launcher restart:\n${missing.join("\n")}\n${platform.logs(120)}`);
  assert.equal(await readThroughApi(session, `rounds/${ROUNDS}.txt`), `${written.at(-1)}\n`);
});
