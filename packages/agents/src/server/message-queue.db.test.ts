import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { SessionService } from "@platform/gen/agents/v1/agents_pb";
import { sql } from "kysely";
import pino from "pino";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { RUN_INTERRUPTED } from "../runs/reaper.ts";
import {
  agentAndSession as agentAndSessionVia,
  parseSse,
  type RestCallOptions,
  restCall,
  type ServerHarness,
  type SseFrame,
  startServerHarness,
} from "../testing/harness.ts";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";

// Messages sent while a run holds the session (issue 20 items 2 and 3),
// through the real service: REST + SSE on the public port, gRPC on the
// internal one. By default a send during a run is queued (`message_queued`
// in the log at once) and runs after the runs before it; `reject` is the
// 409 of before; `interrupt` stops the run and goes next.

const scripted = new ScriptedModel();
const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
let h: ServerHarness;

before(async () => {
  h = await startServerHarness({
    providers,
    // The long exec must outlive the interrupt; a remote interrupt arrives within a third of the lease.
    config: { toolTimeoutMs: 120_000, runLeaseMs: 3000 },
    logger: pino({ level: process.env.MQ_LOG ?? "silent" }),
  });
});
after(async () => {
  await h?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;
type Frame = SseFrame;

const call = (method: string, path: string, opts: RestCallOptions) => restCall(h.base, method, path, opts);

/**
 * Sends and returns once the response headers arrived (the send was
 * accepted: started or queued); `frames` resolves with the whole stream.
 */
async function open(
  token: string,
  sessionId: string,
  content: string,
  opts: { mode?: string; at?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; frames: Promise<Frame[]> }> {
  const res = await fetch(`${opts.at ?? h.base}/v1/sessions/${sessionId}/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content }], ...(opts.mode ? { mode: opts.mode } : {}) }),
    signal: opts.signal,
  });
  if (res.status !== 200) assert.fail(`${res.status}: ${await res.text()}`);
  return { status: res.status, frames: res.text().then(parseSse) };
}

async function agentAndSession(model = "scripted/x") {
  const { caller, session } = await agentAndSessionVia(h, { name: "Q", slug: `q-${Math.random()}`, model });
  return { caller, session: session as Json };
}

async function getSession(token: string, id: string): Promise<Json> {
  const res = await call("GET", `/v1/sessions/${id}`, { token });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Polls GetSession until `ok` holds (the machine is loaded: generous bound, no timing assertion). */
async function until(token: string, id: string, ok: (got: Json) => boolean, what: string): Promise<Json> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await getSession(token, id);
    if (ok(got)) return got;
    if (Date.now() > deadline)
      assert.fail(`timed out waiting for ${what}: ${JSON.stringify(got.events?.map((e: Json) => e.type))}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const types = (events: Json[]) => events.map((e) => e.type as string);
const core = (frames: Frame[]) =>
  frames.filter((f) => f.data.type !== "tool_output" && !String(f.data.type).startsWith("sandbox_"));
const hasText = (text: string) => (got: Json) => got.events.some((e: Json) => e.type === "text" && e.content === text);
const queuedCount = (n: number) => (got: Json) => (got.queuedSends ?? []).length === n;

/** The log's seqs are 1..n, each once (nothing lost, nothing doubled). */
function assertGapless(events: Json[]) {
  assert.deepEqual(
    events.map((e) => Number(e.seq)),
    events.map((_, i) => i + 1),
  );
}

describe("messages sent while a run is going", () => {
  test("three sends during a run: queued at once in the log, processed in order, each stream ends with its own run", async () => {
    const { caller, session } = await agentAndSession();
    const hold = gate();
    scripted.push(
      [
        { type: "text", text: "first" },
        { type: "wait", until: hold.promise },
        { type: "text", text: " run" },
      ],
      [{ type: "text", text: "reply one" }],
      [{ type: "text", text: "reply two" }],
      [{ type: "text", text: "reply three" }],
    );
    const requestsBefore = scripted.requests.length;
    const running = await open(caller.token, session.id, "start");
    await until(caller.token, session.id, hasText("first"), "the first run's text");
    const queued: Array<Promise<Frame[]>> = [];
    for (const [i, content] of ["one", "two", "three"].entries()) {
      queued.push((await open(caller.token, session.id, content)).frames);
      // In the log at once, marked as queued, before the run ends.
      await until(caller.token, session.id, queuedCount(i + 1), `queued send ${content}`);
    }
    const mid = await getSession(caller.token, session.id);
    assert.equal(mid.session.status, "running");
    assert.deepEqual(types(mid.events), ["user", "text", "message_queued", "message_queued", "message_queued"]);
    const queuedEvents = mid.events.filter((e: Json) => e.type === "message_queued");
    assert.deepEqual(
      queuedEvents.map((e: Json) => JSON.parse(e.content)),
      ["one", "two", "three"].map((content) => ({ messages: [{ role: "user", content }], mode: "enqueue" })),
    );
    assert.deepEqual(
      mid.queuedSends.map(Number),
      queuedEvents.map((e: Json) => Number(e.seq)),
    );

    hold.open();
    const first = await running.frames;
    assert.deepEqual(
      first.map((f) => f.data.type),
      ["text", "message_queued", "message_queued", "message_queued", "text", "done"],
      "the running send's stream: its run, and the sends queued meanwhile as they landed in the log",
    );
    for (const [i, frames] of (await Promise.all(queued)).entries()) {
      const content = ["one", "two", "three"][i]!;
      assert.deepEqual(
        frames.map((f) => f.data.type),
        ["message_queued", "user", "text", "done"],
        `stream of ${content}`,
      );
      assert.equal(frames[0]!.id, Number(queuedEvents[i].seq));
      assert.equal(Number(frames[1]!.data.queuedSeq), frames[0]!.id, "the run's message names its queued send");
      assert.equal(frames[1]!.data.content, content);
      assert.equal(frames[2]!.data.content, `reply ${content}`);
    }
    const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
    assertGapless(end.events);
    assert.deepEqual(types(end.events), [
      "user",
      "text",
      "message_queued",
      "message_queued",
      "message_queued",
      "text",
      "done",
      ...["user", "text", "done"],
      ...["user", "text", "done"],
      ...["user", "text", "done"],
    ]);
    assert.deepEqual(end.queuedSends ?? [], []);
    // The model saw each queued message once, in order, after the run before it.
    const seen = scripted.requests
      .slice(requestsBefore)
      .map((r) => r.messages.filter((m) => m.role === "user").map((m) => m.content));
    assert.deepEqual(seen, [["start"], ["start", "one"], ["start", "one", "two"], ["start", "one", "two", "three"]]);
  });

  test("mode reject: 409 aborted while a run holds the session, nothing logged; a bad mode is 400 (REST and gRPC)", async () => {
    const { caller, session } = await agentAndSession();
    const hold = gate();
    scripted.push([
      { type: "text", text: "busy" },
      { type: "wait", until: hold.promise },
    ]);
    const running = await open(caller.token, session.id, "hold on");
    await until(caller.token, session.id, hasText("busy"), "the run's text");
    const rejected = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "no" }], mode: "reject" },
    });
    assert.equal(rejected.status, 409, rejected.text);
    assert.equal(rejected.json.error.code, "aborted");
    assert.match(rejected.json.error.message, /active run/);
    const bad = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "no" }], mode: "later" },
    });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.code, "invalid_argument");
    assert.match(bad.json.error.message, /mode must be "enqueue", "reject" or "interrupt"/);
    // Hostile values (the contract's hostile-input walk uses these three): 400, never stored.
    for (const mode of ["\u0000", "\ud800", "x".repeat(100_000)]) {
      const hostile = await call("POST", `/v1/sessions/${session.id}/messages`, {
        token: caller.token,
        body: { messages: [{ role: "user", content: "no" }], mode },
      });
      assert.equal(hostile.status, 400, hostile.text.slice(0, 200));
      assert.ok(hostile.text.length < 1000, "the refusal does not echo a long value");
    }
    const grpc = createClient(SessionService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    for (const [mode, code] of [
      ["reject", Code.Aborted],
      ["INTERRUPT", Code.InvalidArgument],
    ] as const) {
      await assert.rejects(
        (async () => {
          for await (const _ of grpc.sendMessages(
            { id: session.id, messages: [{ role: "user", content: "no" }], mode },
            { headers },
          ));
        })(),
        (err: unknown) => ConnectError.from(err).code === code,
      );
    }
    const got = await getSession(caller.token, session.id);
    assert.deepEqual(types(got.events), ["user", "text"], "nothing of the refused sends was logged");
    hold.open();
    assert.equal((await running.frames).at(-1)?.data.type, "done");
  });

  test("the queue is bounded: past 32 queued sends a send is 429 queue_full, nothing logged; the 32 all run", async () => {
    const { caller, session } = await agentAndSession();
    const hold = gate();
    scripted.push([
      { type: "text", text: "long one" },
      { type: "wait", until: hold.promise },
    ]);
    const running = await open(caller.token, session.id, "first");
    await until(caller.token, session.id, hasText("long one"), "the run's text");
    const streams: Array<Promise<Frame[]>> = [];
    for (let i = 0; i < 32; i++) streams.push((await open(caller.token, session.id, `q${i}`)).frames);
    const full = await call("POST", `/v1/sessions/${session.id}/messages`, {
      token: caller.token,
      body: { messages: [{ role: "user", content: "one too many" }] },
    });
    assert.equal(full.status, 429, full.text);
    assert.equal(full.json.error.code, "resource_exhausted");
    assert.match(full.json.error.message, /32 queued sends/);
    const mid = await getSession(caller.token, session.id);
    assert.equal(mid.queuedSends.length, 32);
    assert.ok(!JSON.stringify(mid.events).includes("one too many"), "the refused send was not logged");
    hold.open();
    await running.frames;
    for (const frames of await Promise.all(streams)) assert.equal(frames.at(-1)?.data.type, "done");
    const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
    assertGapless(end.events);
    assert.deepEqual(
      end.events.filter((e: Json) => e.type === "user").map((e: Json) => e.content),
      ["first", ...Array.from({ length: 32 }, (_, i) => `q${i}`)],
    );
  });

  test("over gRPC: a queued send's stream is its message_queued, then its run, to done", async () => {
    const { caller, session } = await agentAndSession();
    const hold = gate();
    scripted.push(
      [
        { type: "text", text: "grpc first" },
        { type: "wait", until: hold.promise },
      ],
      [{ type: "text", text: "grpc second" }],
    );
    const running = await open(caller.token, session.id, "a");
    await until(caller.token, session.id, hasText("grpc first"), "the run's text");
    const grpc = createClient(SessionService, grpcTransport(h.grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    const stream = grpc
      .sendMessages({ id: session.id, messages: [{ role: "user", content: "b" }], mode: "enqueue" }, { headers })
      [Symbol.asyncIterator]();
    const firstEvent = await stream.next();
    assert.equal(firstEvent.value?.type, "message_queued");
    hold.open();
    const rest: string[] = [];
    for (let r = await stream.next(); !r.done; r = await stream.next()) rest.push(r.value.type);
    assert.deepEqual(rest, ["user", "text", "done"]);
    await running.frames;
  });
});

describe("interrupt", () => {
  test("during a model turn: the run ends with error, its text stays, the new message's run follows; a Last-Event-ID rejoin loses and doubles nothing", async () => {
    const { caller, session } = await agentAndSession();
    const never = gate();
    scripted.push(
      [
        { type: "text", text: "thinking about the long task" },
        { type: "wait", until: never.promise },
        { type: "text", text: "never sent" },
      ],
      [{ type: "text", text: "doing the new thing" }],
    );
    const requestsBefore = scripted.requests.length;
    const running = await open(caller.token, session.id, "long task");
    const mid = await until(caller.token, session.id, hasText("thinking about the long task"), "the run's text");
    const seenSeq = Number(mid.events.at(-1).seq);
    const interrupting = await open(caller.token, session.id, "stop, do this instead", { mode: "interrupt" });
    const first = await running.frames;
    assert.deepEqual(
      first.map((f) => [f.data.type, f.data.content]),
      [
        ["text", "thinking about the long task"],
        [
          "message_queued",
          JSON.stringify({ messages: [{ role: "user", content: "stop, do this instead" }], mode: "interrupt" }),
        ],
        ["error", "the run was interrupted by a new message"],
      ],
    );
    const second = await interrupting.frames;
    assert.deepEqual(
      second.map((f) => f.data.type),
      ["message_queued", "user", "text", "done"],
    );
    assert.equal(JSON.parse(second[0]!.data.content).mode, "interrupt");
    assert.equal(second[2]!.data.content, "doing the new thing");
    const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
    assertGapless(end.events);
    assert.deepEqual(types(end.events), ["user", "text", "message_queued", "error", "user", "text", "done"]);
    // The model of the new run saw the interrupted turn's text, then the new message.
    const next = scripted.requests[requestsBefore + 1]!;
    assert.deepEqual(
      next.messages.map((m) => [m.role, m.content]),
      [
        ["user", "long task"],
        ["assistant", "thinking about the long task"],
        ["user", "stop, do this instead"],
      ],
    );
    // A client that saw up to the interrupted text rejoins: the rest once, in order.
    const rejoined = await call("GET", `/v1/sessions/${session.id}/events`, {
      token: caller.token,
      lastEventId: String(seenSeq),
    });
    const frames = parseSse(rejoined.text);
    assert.deepEqual(
      frames.map((f) => f.id),
      end.events.filter((e: Json) => Number(e.seq) > seenSeq).map((e: Json) => Number(e.seq)),
    );
  });

  test("during a long exec: the exec is cancelled, its call gets an error result, the log keeps it all, the new run follows", async () => {
    const { caller, session } = await agentAndSession();
    scripted.push(
      [{ type: "tool_use", call: { id: "toolu_hang", name: "bash", input: { command: "hang" } } }],
      [{ type: "text", text: "ok, stopped" }],
    );
    const cancelledBefore = h.compute.cancelledExecs.length;
    const running = await open(caller.token, session.id, "run forever");
    const deadline = Date.now() + 30_000;
    while (!h.compute.execCalls.some((c) => c.args.includes("hang") || c.command.includes("hang"))) {
      if (Date.now() > deadline)
        assert.fail(`the exec never started: ${JSON.stringify((await getSession(caller.token, session.id)).events)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const interrupting = await open(caller.token, session.id, "never mind", { mode: "interrupt" });
    const first = core(await running.frames);
    assert.deepEqual(
      first.map((f) => [f.data.type, f.data.toolUseId ?? ""]),
      [
        ["tool_use", "toolu_hang"],
        ["message_queued", ""],
        ["tool_result", "toolu_hang"],
        ["error", ""],
      ],
    );
    assert.equal(first[2]!.data.isError, true);
    assert.match(first[2]!.data.content, /interrupted by a new message/);
    assert.equal(first[3]!.data.content, "the run was interrupted by a new message");
    const second = await interrupting.frames;
    assert.deepEqual(
      second.map((f) => f.data.type),
      ["message_queued", "user", "text", "done"],
    );
    // Compute sees the exec's call cancelled (it then stops the process: SIGTERM, SIGKILL after 10 s);
    // the cancel reaches it over HTTP/2 a moment after the run ended.
    const cancelDeadline = Date.now() + 15_000;
    while (h.compute.cancelledExecs.length === cancelledBefore && Date.now() < cancelDeadline)
      await new Promise((r) => setTimeout(r, 20));
    assert.equal(h.compute.cancelledExecs.length, cancelledBefore + 1);
    const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
    assertGapless(end.events);
    assert.deepEqual(
      types(end.events).filter((t) => t !== "tool_output" && !t.startsWith("sandbox_")),
      ["user", "tool_use", "message_queued", "tool_result", "error", "user", "text", "done"],
    );
  });

  test("on another replica: the interrupt reaches the run through the database; the queued send runs after it", async () => {
    const { caller, session } = await agentAndSession();
    const never = gate();
    scripted.push(
      [
        { type: "text", text: "on replica one" },
        { type: "wait", until: never.promise },
      ],
      [{ type: "text", text: "switched" }],
    );
    const other = await h.replica();
    const otherBase = other.url;
    try {
      const running = await open(caller.token, session.id, "work");
      await until(caller.token, session.id, hasText("on replica one"), "the run's text");
      const started = Date.now();
      const interrupting = await open(caller.token, session.id, "switch", { mode: "interrupt", at: otherBase });
      const first = await running.frames;
      assert.equal(first.at(-1)?.data.type, "error");
      assert.equal(first.at(-1)?.data.content, "the run was interrupted by a new message");
      const second = await interrupting.frames;
      assert.deepEqual(second.map((f) => [f.data.type, f.data.content]).slice(1), [
        ["user", "switch"],
        ["text", "switched"],
        ["done", undefined],
      ]);
      console.log(
        `# remote interrupt: the interrupting stream ended ${Date.now() - started} ms after the send (lease 3000 ms)`,
      );
      const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
      assertGapless(end.events);
    } finally {
      await other.server.close();
    }
  });
});

describe("restarts", () => {
  test("a send queued when the service stops runs after the restart (the queue is in the database)", async () => {
    const { caller, session } = await agentAndSession();
    const never = gate();
    scripted.push(
      [
        { type: "text", text: "before the restart" },
        { type: "wait", until: never.promise },
      ],
      [{ type: "text", text: "after the restart" }],
    );
    const streams = new AbortController();
    const running = await open(caller.token, session.id, "first", { signal: streams.signal });
    running.frames.catch(() => {});
    await until(caller.token, session.id, hasText("before the restart"), "the run's text");
    const queued = await open(caller.token, session.id, "queued across the restart", { signal: streams.signal });
    queued.frames.catch(() => {});
    await until(caller.token, session.id, queuedCount(1), "the queued send");
    streams.abort();
    await h.stop();
    const stopped = await getSessionDirect(caller.token, session.id);
    assert.equal(stopped, undefined);
    await h.start();
    const end = await until(
      caller.token,
      session.id,
      (g) => g.session.status === "idle" && g.events.at(-1)?.type === "done",
      "the queued send's run after the restart",
    );
    assertGapless(end.events);
    assert.deepEqual(types(end.events), ["user", "text", "message_queued", "error", "user", "text", "done"]);
    const taken = end.events[4];
    assert.equal(taken.content, "queued across the restart");
    assert.equal(Number(taken.queuedSeq), Number(end.events[2].seq));
    assert.equal(end.events[5].content, "after the restart");
    assert.deepEqual(end.queuedSends ?? [], []);
  });
});

describe("takeover", () => {
  test("a send queued behind a run whose process died runs once the dead run is ended (lease lapsed)", async () => {
    const { caller, session } = await agentAndSession();
    scripted.push([{ type: "text", text: "taken over" }]);
    // A run of a process that is gone holds the session for 1.5 s more.
    const deadRun = randomUUID();
    await sql`update sessions set active_run_id = ${deadRun}::uuid, run_owner = 'gone:1#dead',
      run_lease_until = now() + make_interval(secs => 1.5) where id = ${session.id}::uuid`.execute(h.database.db);
    const queued = await open(caller.token, session.id, "after the dead one");
    const frames = await queued.frames;
    assert.deepEqual(
      frames.map((f) => f.data.type),
      ["message_queued", "user", "text", "done"],
    );
    const end = await until(caller.token, session.id, (g) => g.session.status === "idle", "idle");
    assertGapless(end.events);
    assert.deepEqual(
      end.events.map((e: Json) => [e.type, e.content]),
      [
        [
          "message_queued",
          JSON.stringify({ messages: [{ role: "user", content: "after the dead one" }], mode: "enqueue" }),
        ],
        ["error", RUN_INTERRUPTED],
        ["user", "after the dead one"],
        ["text", "taken over"],
        ["done", ""],
      ],
    );
  });
});

/** While the service is down there is nothing to ask (the call fails): undefined. */
async function getSessionDirect(token: string, id: string): Promise<Json | undefined> {
  try {
    return await getSession(token, id);
  } catch {
    return undefined;
  }
}
