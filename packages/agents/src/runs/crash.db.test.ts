import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createTestDatabase, seedPgliteDataDir, testServerUrl } from "@platform/db/testing";
import { MIGRATIONS_TABLE, migrations } from "../db/migrations.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { RUN_INTERRUPTED, TOOL_INTERRUPTED } from "./reaper.ts";

// The agents process killed with SIGKILL in the middle of a run, while the
// run's tool call (`hang`, which never ends) is in flight. The run must not
// hold its session forever: it ends with the tool call reported interrupted
// and an `error` event, by another replica once its lease lapsed, or by the
// restarted process at its start; a client resuming the stream gets that
// end, and the session takes the next message.

const main = new URL("../main.ts", import.meta.url).pathname;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const onPostgres = testServerUrl() !== undefined;
const children = new Set<ChildProcess>();
const dataDirs: string[] = [];
let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;

before(async () => {
  await identity.start();
  await compute.start();
  if (onPostgres) database = await createTestDatabase();
});
after(async () => {
  for (const c of children) c.kill("SIGKILL");
  await identity.stop();
  await compute.stop();
  await database?.close();
  for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

type Agents = { base: string; proc: ChildProcess; port: number };

/** Starts the agents process (PostgreSQL of the test run, or PGlite in `dataDir`) and waits until it answers. */
async function startAgents(options: { port?: number; leaseMs: number; dataDir: string }): Promise<Agents> {
  const port = options.port ?? (await freePort());
  const proc = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", main], {
    env: {
      PATH: process.env.PATH ?? "",
      LOG_LEVEL: "warn",
      AGENTS_PORT: String(port),
      AGENTS_GRPC_PORT: String(await freePort()),
      INTERNAL_TLS: "off",
      HOST: "127.0.0.1",
      AGENTS_DATA_DIR: options.dataDir,
      AGENTS_RUN_LEASE_MS: String(options.leaseMs),
      ...(database?.url ? { DATABASE_URL: database.url } : {}),
      IDENTITY_GRPC_URL: identity.url,
      COMPUTE_GRPC_URL: compute.url,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(proc);
  let stderr = "";
  proc.stderr!.on("data", (c) => (stderr += c));
  proc.stdout!.on("data", (c) => (stderr += c));
  proc.on("exit", () => children.delete(proc));
  const base = `http://127.0.0.1:${port}`;
  // tsx compiling the service, plus PGlite's cold start: seconds, minutes on a machine loaded by parallel work.
  const deadline = Date.now() + 300_000;
  while (
    !(await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    assert.ok(Date.now() < deadline && proc.exitCode === null, `the agents service did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { base, proc, port };
}

async function kill(agents: Agents): Promise<void> {
  const exited = new Promise((resolve) => agents.proc.once("exit", resolve));
  agents.proc.kill("SIGKILL");
  await exited;
}

type Event = { id: number; type: string; content?: string; toolUseId?: string; isError?: boolean };

/** Reads an SSE response's events as they come. */
async function* sse(res: Response): AsyncGenerator<Event> {
  if (res.status !== 200) assert.fail(`${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const id = /^id: ?(\d+)$/m.exec(frame)?.[1];
      const data = /^data: ?(.*)$/m.exec(frame)?.[1];
      if (data) yield { id: Number(id), ...(JSON.parse(data) as Omit<Event, "id">) };
    }
  }
}

function client(base: string, token: string) {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  return {
    async post(path: string, body: unknown): Promise<Response> {
      return fetch(`${base}${path}`, {
        method: "POST",
        headers: { ...headers, accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
    },
    async json(path: string, body?: unknown): Promise<Record<string, unknown>> {
      const res = await fetch(
        `${base}${path}`,
        body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) },
      );
      assert.ok(res.ok, `${path}: ${res.status} ${await res.clone().text()}`);
      return (await res.json()) as Record<string, unknown>;
    },
    resume(sessionId: string, lastEventId: number, signal?: AbortSignal): Promise<Response> {
      return fetch(`${base}/v1/sessions/${sessionId}/events`, {
        headers: { ...headers, accept: "text/event-stream", "last-event-id": String(lastEventId) },
        signal,
      });
    },
  };
}

type Logged = { seq: string; type: string; content?: string; toolUseId?: string; isError?: boolean };

/** A session whose run is inside a tool call that never ends: returns what the client was streamed. */
async function runIntoHangingTool(agents: Agents, token: string) {
  const api = client(agents.base, token);
  const agent = await api.json("/v1/agents", {
    name: "crash",
    slug: `crash-${Math.random().toString(36).slice(2)}`,
    model: "dev/echo",
  });
  const session = await api.json("/v1/sessions", { agentId: agent.id });
  const sessionId = session.id as string;
  const calls = compute.execCalls.length;
  const seen: Event[] = [];
  const stream = sse(
    await api.post(`/v1/sessions/${sessionId}/messages`, { messages: [{ role: "user", content: "run: hang" }] }),
  );
  for await (const event of stream) {
    seen.push(event);
    if (event.type === "tool_use") break;
  }
  // The tool call reached compute: it is in flight.
  const deadline = Date.now() + 30_000;
  while (!compute.execCalls.slice(calls).some((c) => c.args[1] === "hang")) {
    assert.ok(Date.now() < deadline, "the tool call did not reach compute");
    await new Promise((r) => setTimeout(r, 20));
  }
  return { sessionId, seen };
}

/** Waits until the session's log ends with a terminal event; returns the log. */
async function awaitEnd(
  base: string,
  token: string,
  sessionId: string,
  timeoutMs: number,
): Promise<{ events: Logged[]; status: string }> {
  const api = client(base, token);
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const read = await api.json(`/v1/sessions/${sessionId}`);
    const events = read.events as Logged[];
    if (["done", "error"].includes(events.at(-1)?.type ?? ""))
      return { events, status: (read.session as { status: string }).status };
    assert.ok(
      Date.now() < deadline,
      `no terminal event within ${timeoutMs} ms: ${JSON.stringify(events.map((e) => e.type))}`,
    );
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The log of a run killed inside its tool call, once ended: the call's result says it was interrupted, then the error. */
function assertInterrupted(events: Logged[], seen: Event[]) {
  const toolUse = seen.find((e) => e.type === "tool_use")!;
  assert.deepEqual(
    events.map((e) => e.type),
    ["user", "tool_use", "tool_result", "error"],
  );
  assert.deepEqual(
    seen.map((e) => [e.id, e.type]),
    events.slice(1, seen.length + 1).map((e) => [Number(e.seq), e.type]),
    "every event the client saw is in the log with its id",
  );
  const result = events[2]!;
  assert.equal(result.toolUseId, toolUse.toolUseId, "the in-flight call is the one reported");
  assert.equal(result.isError, true);
  assert.equal(result.content, TOOL_INTERRUPTED);
  assert.equal(events[3]!.content, RUN_INTERRUPTED);
}

async function nextMessageAccepted(base: string, token: string, sessionId: string) {
  const res = await client(base, token).post(`/v1/sessions/${sessionId}/messages`, {
    messages: [{ role: "user", content: "are you there" }],
  });
  const events: Event[] = [];
  for await (const e of sse(res)) events.push(e);
  assert.equal(events.at(-1)?.type, "done", "the session took the next message");
}

// Each test starts two processes; on a loaded machine a start alone can take a minute or two.
describe("a run whose process is killed", { timeout: 900_000 }, () => {
  test("another replica ends it once its lease lapses: the tool call is reported interrupted, a resuming client gets the end, the session takes the next message", {
    skip: onPostgres ? false : "PGlite belongs to one process: there is no other replica (the restart test covers it)",
  }, async (t) => {
    const leaseMs = 3000;
    const dir = mkdtempSync(join(tmpdir(), "agents-crash-"));
    dataDirs.push(dir);
    const caller = identity.caller();
    const [a, b] = await Promise.all([startAgents({ leaseMs, dataDir: dir }), startAgents({ leaseMs, dataDir: dir })]);
    const { sessionId, seen } = await runIntoHangingTool(a, caller.token);
    await kill(a);
    const killedAt = Date.now();
    // A client of the dead replica resumes on B from the last event it saw; it waits through the lease.
    const resumed = sse(await client(b.base, caller.token).resume(sessionId, seen.at(-1)!.id));
    const rest: Event[] = [];
    for await (const e of resumed) rest.push(e);
    const endedAfter = Date.now() - killedAt;
    assert.deepEqual(
      rest.map((e) => e.type),
      ["tool_result", "error"],
      "the resumed stream ends with the run's end",
    );
    const { events, status } = await awaitEnd(b.base, caller.token, sessionId, 1000);
    assertInterrupted(events, seen);
    assert.deepEqual(
      rest.map((e) => [e.id, e.type]),
      events.slice(seen.length + 1).map((e) => [Number(e.seq), e.type]),
    );
    assert.equal(status, "idle");
    // Bound: the lease (renewed every third of it, so it lapses at most a lease after the kill), plus the follower's
    // one-second poll, plus generous slack for a loaded machine.
    assert.ok(endedAfter <= leaseMs + 1000 + 10_000, `ended ${endedAfter} ms after the kill`);
    t.diagnostic(`a dead run ended ${endedAfter} ms after the kill (lease ${leaseMs} ms), by another replica`);
    await nextMessageAccepted(b.base, caller.token, sessionId);
    await kill(b);
  });

  test("restarted (same host and port; or PGlite's one process), it ends its earlier process's run at start, long before the lease", async (t) => {
    const leaseMs = 120_000;
    const dir = mkdtempSync(join(tmpdir(), "agents-crash-"));
    dataDirs.push(dir);
    // On PGlite a migrated cluster already: the first start skips PGlite's initdb (5 s of CPU) and the
    // migrations, which are not the subject (a restart is).
    if (!onPostgres) await seedPgliteDataDir(dir, { table: MIGRATIONS_TABLE, migrations });
    const caller = identity.caller();
    const first = await startAgents({ leaseMs, dataDir: dir });
    const { sessionId, seen } = await runIntoHangingTool(first, caller.token);
    // While the run is alive, the session refuses a second one.
    const busy = await client(first.base, caller.token).post(`/v1/sessions/${sessionId}/messages`, {
      messages: [{ role: "user", content: "again" }],
      mode: "reject",
    });
    assert.equal(busy.status, 409);
    await kill(first);
    const killedAt = Date.now();
    const again = await startAgents({ leaseMs, dataDir: dir, port: first.port });
    const { events, status } = await awaitEnd(again.base, caller.token, sessionId, 30_000);
    const endedAfter = Date.now() - killedAt;
    assertInterrupted(events, seen);
    assert.equal(status, "idle");
    assert.ok(endedAfter < leaseMs / 2, `ended ${endedAfter} ms after the kill, not by the ${leaseMs} ms lease`);
    t.diagnostic(`a dead run ended ${endedAfter} ms after the kill, by the restarted process (restart included)`);
    // A client resuming after the end gets the end and the stream closes.
    const rest: Event[] = [];
    for await (const e of sse(await client(again.base, caller.token).resume(sessionId, seen.at(-1)!.id))) rest.push(e);
    assert.deepEqual(
      rest.map((e) => e.type),
      ["tool_result", "error"],
    );
    await nextMessageAccepted(again.base, caller.token, sessionId);
    await kill(again);
  });
});
