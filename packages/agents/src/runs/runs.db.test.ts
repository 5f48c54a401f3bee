import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import type { SessionEvent } from "@platform/gen/agents/v1/agents_pb";
import { collect, type Harness, startHarness } from "../testing/harness.ts";
import { gate } from "../testing/scripted-model.ts";

let h: Harness;
before(async () => {
  // The timeout test uses a command that never ends, so a generous timeout keeps
  // the other tool tests clear of it on a loaded machine.
  h = await startHarness({ toolTimeoutMs: 3000, toolOutputLimitBytes: 2048, runLeaseMs: 5000 });
});
after(async () => {
  await h?.close();
});

async function newSession(model = "dev/echo") {
  const caller = h.identity.caller();
  const { agent } = await h.agents.createAgent(
    { name: "a", slug: `s-${Math.random()}`, model, systemPrompt: "" },
    h.as(caller),
  );
  const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(caller));
  return { caller, agentId: agent!.id, id: session!.id };
}

const user = (content: string) => ({ role: "user", content });
const types = (events: SessionEvent[]) => events.map((e) => e.type);

function assertGapless(events: SessionEvent[], from = 1n) {
  for (const [i, e] of events.entries()) assert.equal(e.seq, from + BigInt(i), `seq of event ${i}`);
}

describe("send messages", () => {
  test("dev model echoes as text fragments, ends with done and cumulative tokens; all in the log", async () => {
    const s = await newSession();
    const events = await collect(
      h.sessions.sendMessages(
        { id: s.id, messages: [user("the quick brown fox jumps over the lazy dog again and again")] },
        h.as(s.caller),
      ),
    );
    assert.equal(events.at(-1)?.type, "done");
    assert.ok(events.filter((e) => e.type === "text").length >= 2, "streamed in several fragments");
    assert.equal(
      events
        .filter((e) => e.type === "text")
        .map((e) => e.content)
        .join(""),
      "echo: the quick brown fox jumps over the lazy dog again and again",
    );
    const done = events.at(-1)!;
    assert.equal(done.tokensIn, 12n);
    assert.equal(done.tokensOut, 13n);
    // The stream is the log after the user's message: seq 1 is the message.
    assertGapless(events, 2n);
    const { session, events: log } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(log[0]?.type, "user");
    assert.equal(log[0]?.content, "the quick brown fox jumps over the lazy dog again and again");
    assert.deepEqual(
      log.slice(1).map((e) => [e.seq, e.type, e.content]),
      events.map((e) => [e.seq, e.type, e.content]),
    );
    assert.equal(session?.lastSeq, BigInt(log.length));
    assert.equal(session?.status, "idle");
    assert.equal(h.compute.createCalls.filter((c) => c.sessionId === s.id).length, 0, "no tool call, no sandbox");
  });

  test("the next send right after a terminal event is accepted (no 409 window)", async () => {
    const s = await newSession();
    for (let i = 0; i < 5; i++) {
      const events = await collect(
        h.sessions.sendMessages({ id: s.id, messages: [user(`turn ${i}`)] }, h.as(s.caller)),
      );
      assert.equal(events.at(-1)?.type, "done");
    }
  });

  test("messages are validated: non-empty, roles, toolUseId only for tool", async () => {
    const s = await newSession();
    const bad = async (messages: Array<Record<string, unknown>>, pattern: RegExp) => {
      await assert.rejects(collect(h.sessions.sendMessages({ id: s.id, messages }, h.as(s.caller))), (err: unknown) => {
        const e = ConnectError.from(err);
        assert.equal(e.code, Code.InvalidArgument);
        assert.match(e.rawMessage, pattern);
        return true;
      });
    };
    await bad([], /messages/);
    await bad([{ role: "system", content: "x" }], /role/);
    await bad([{ role: "tool", content: "x" }], /toolUseId/);
    await bad([{ role: "user", content: "x", toolUseId: "t" }], /toolUseId/);
    await bad([{ role: "user", content: "" }], /content/);
    await assert.rejects(collect(h.sessions.sendMessages({ id: "x", messages: [user("hi")] }, h.as(s.caller))), /UUID/);
    const other = h.identity.caller();
    await assert.rejects(
      collect(h.sessions.sendMessages({ id: s.id, messages: [user("hi")] }, h.as(other))),
      /not found/,
    );
    const { events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(events.length, 0, "nothing logged for rejected sends");
  });

  test("a tool result message from the client is logged with toolUseId and isError", async () => {
    const s = await newSession();
    await collect(
      h.sessions.sendMessages(
        {
          id: s.id,
          messages: [
            user("hi"),
            { role: "assistant", content: "calling" },
            { role: "tool", content: "boom", toolUseId: "t1", isError: true },
          ],
        },
        h.as(s.caller),
      ),
    );
    const { events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(
      events.slice(0, 3).map((e) => [e.type, e.toolUseId, e.isError]),
      [
        ["user", "", false],
        ["assistant", "", false],
        ["tool", "t1", true],
      ],
    );
  });
});

describe("tool loop", () => {
  test("a session whose runs make no tool call never calls CreateSandbox", async () => {
    const s = await newSession();
    const before = h.compute.createCalls.length;
    for (const text of ["hello", "tell me more", "/fail oops"]) {
      await collect(h.sessions.sendMessages({ id: s.id, messages: [user(text)] }, h.as(s.caller)));
    }
    assert.equal(h.compute.createCalls.length, before, "no CreateSandbox at all");
    const { session } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(session?.sandboxId, "");
    // The first tool call is what creates it.
    await collect(h.sessions.sendMessages({ id: s.id, messages: [user("/ls")] }, h.as(s.caller)));
    assert.deepEqual(h.compute.createCalls.slice(before), [{ tenantId: s.caller.orgId, sessionId: s.id }]);
  });

  test("bash tool_use runs in a sandbox created once per session, result goes back to the model", async () => {
    const s = await newSession();
    const first = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("run: echo hi")] }, h.as(s.caller)),
    );
    assert.deepEqual(
      types(first).filter((t) => t !== "text"),
      ["tool_use", "tool_output", "tool_result", "done"],
    );
    const use = first.find((e) => e.type === "tool_use")!;
    const output = first.find((e) => e.type === "tool_output")!;
    assert.equal(output.toolUseId, use.toolUseId);
    assert.deepEqual(JSON.parse(output.content), { stdout: "hi\n" });
    assert.deepEqual(JSON.parse(use.content), { name: "bash", input: { command: "echo hi" } });
    const result = first.find((e) => e.type === "tool_result")!;
    assert.equal(result.toolUseId, use.toolUseId);
    assert.deepEqual(JSON.parse(result.content), { exitCode: 0, stdout: "hi\n" });
    assert.equal(result.isError, false);
    const summary = first
      .filter((e) => e.type === "text")
      .map((e) => e.content)
      .join("");
    assert.match(summary, /exited with code 0/);
    assert.ok(first.at(-1)!.tokensIn > 0n && first.at(-1)!.tokensOut > 0n);

    const creates = h.compute.createCalls.filter((c) => c.sessionId === s.id);
    assert.equal(creates.length, 1);
    assert.equal(creates[0]!.tenantId, s.caller.orgId, "tenant = org");
    assert.equal(creates[0]!.sessionId, s.id);
    const { session } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.ok(session?.sandboxId);

    // A later run reuses the sandbox.
    const second = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("/bash exit 3")] }, h.as(s.caller)),
    );
    assert.equal(JSON.parse(second.find((e) => e.type === "tool_result")!.content).exitCode, 3);
    assert.equal(h.compute.createCalls.filter((c) => c.sessionId === s.id).length, 1);
    const execs = h.compute.execCalls.filter((c) => c.sandboxId === session!.sandboxId);
    assert.equal(execs.length, 2);
    assert.deepEqual(execs[0]!.args, ["-c", "echo hi"]);
  });

  test("a session whose sandbox can no longer run (FAILED) gets a new one on its next tool call", async () => {
    const s = await newSession();
    await collect(h.sessions.sendMessages({ id: s.id, messages: [user("run: echo one")] }, h.as(s.caller)));
    const first = (await h.sessions.getSession({ id: s.id }, h.as(s.caller))).session!.sandboxId;
    h.compute.fail(first);
    const next = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("run: echo two")] }, h.as(s.caller)),
    );
    const result = next.find((e) => e.type === "tool_result")!;
    assert.equal(result.isError, false);
    assert.deepEqual(JSON.parse(result.content), { exitCode: 0, stdout: "two\n" });
    const second = (await h.sessions.getSession({ id: s.id }, h.as(s.caller))).session!.sandboxId;
    assert.notEqual(second, first, "a new sandbox replaced the failed one");
    assert.equal(h.compute.createCalls.filter((c) => c.sessionId === s.id).length, 2);
    assert.equal(h.compute.execCalls.filter((c) => c.sandboxId === second).length, 1);
  });

  test("file tools write, read and list in the workspace", async () => {
    const s = await newSession();
    await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("/write notes.txt hello file")] }, h.as(s.caller)),
    );
    const read = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("/read notes.txt")] }, h.as(s.caller)),
    );
    assert.equal(JSON.parse(read.find((e) => e.type === "tool_result")!.content).content, "hello file");
    const list = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("/ls")] }, h.as(s.caller)));
    assert.deepEqual(
      JSON.parse(list.find((e) => e.type === "tool_result")!.content).entries.map((e: { path: string }) => e.path),
      ["notes.txt"],
    );
    const missing = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("/read nope.txt")] }, h.as(s.caller)),
    );
    const failed = missing.find((e) => e.type === "tool_result")!;
    assert.equal(failed.isError, true);
    assert.equal(missing.at(-1)?.type, "done", "a failed tool does not end the turn");
  });

  test("a tool past its timeout yields an error tool_result and the turn goes on", async () => {
    const s = await newSession();
    const events = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("run: hang")] }, h.as(s.caller)));
    const result = events.find((e) => e.type === "tool_result")!;
    assert.equal(result.isError, true);
    assert.match(JSON.parse(result.content).error, /timed out/);
    assert.equal(events.at(-1)?.type, "done");
  });

  test("tool output given to the model is capped", async () => {
    const s = await newSession();
    const events = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("run: yes 100000")] }, h.as(s.caller)),
    );
    const result = events.find((e) => e.type === "tool_result")!;
    assert.ok(Buffer.byteLength(result.content) <= 2048 + 1024, `capped, got ${result.content.length}`);
    const parsed = JSON.parse(result.content);
    assert.equal(parsed.truncated, true);
    assert.equal(parsed.stdoutBytes, 100000);
  });

  test("scripted model: tool_use goes to compute and the model gets the result in its next call", async () => {
    const s = await newSession("scripted/x");
    h.scripted.push(
      [
        { type: "text", text: "let me look" },
        { type: "tool_use", call: { id: "call_1", name: "bash", input: { command: "echo 42" } } },
        { type: "usage", inputTokens: 10, outputTokens: 5 },
      ],
      [
        { type: "text", text: "it is 42" },
        { type: "usage", inputTokens: 30, outputTokens: 2 },
        { type: "usage", inputTokens: 30, outputTokens: 7 },
      ],
    );
    const before = h.scripted.requests.length;
    const events = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("what is it")] }, h.as(s.caller)));
    // The live output is in the log, but the model's next call sees only the tool result (below).
    assert.deepEqual(types(events), ["text", "tool_use", "tool_output", "tool_result", "text", "done"]);
    const done = events.at(-1)!;
    assert.equal(done.tokensIn, 40n, "summed over the run's two model calls");
    assert.equal(done.tokensOut, 12n, "latest running total per call, never summed twice");
    const second = h.scripted.requests[before + 1]!;
    assert.deepEqual(second.messages, [
      { role: "user", content: "what is it" },
      {
        role: "assistant",
        content: "let me look",
        toolCalls: [{ id: "call_1", name: "bash", input: { command: "echo 42" } }],
      },
      { role: "tool", toolUseId: "call_1", content: '{"exitCode":0,"stdout":"42\\n"}', isError: false },
    ]);
    assert.deepEqual(
      second.tools.map((t) => t.name),
      ["bash", "read_file", "write_file", "list_files"],
    );
  });
});

describe("provider failures", () => {
  test("unreachable before the stream: unavailable, and the log keeps the message and an error event", async () => {
    const s = await newSession("scripted/x");
    h.scripted.push("unreachable");
    await assert.rejects(
      collect(h.sessions.sendMessages({ id: s.id, messages: [user("hi")] }, h.as(s.caller))),
      (err: unknown) => {
        assert.equal(ConnectError.from(err).code, Code.Unavailable);
        return true;
      },
    );
    const { session, events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(types(events), ["user", "error"]);
    assert.equal(session?.status, "idle", "the session is free again");
  });

  test("an agent whose provider is no longer configured is unavailable", async () => {
    // Creation refuses such a model (model-providers.db.test.ts): this agent was made while its
    // provider was configured, and the provider was turned off since.
    const s = await newSession();
    await h.database.db.updateTable("agents").set({ model: "nowhere/x" }).where("id", "=", s.agentId).execute();
    await assert.rejects(
      collect(h.sessions.sendMessages({ id: s.id, messages: [user("hi")] }, h.as(s.caller))),
      (err: unknown) => {
        assert.equal(ConnectError.from(err).code, Code.Unavailable);
        return true;
      },
    );
  });

  test("a mid-stream failure ends with an error event; the partial output stays in the log", async () => {
    const s = await newSession();
    const events = await collect(
      h.sessions.sendMessages(
        { id: s.id, messages: [user("/fail partial words of a reply long enough to come in pieces")] },
        h.as(s.caller),
      ),
    );
    assert.deepEqual(types(events), ["text", "text", "error"]);
    assert.equal(events[0]!.content + events[1]!.content, "partial words of a reply long enough to come in pieces");
    assert.match(events.at(-1)!.content, /./);
    const { events: log } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(types(log), ["user", "text", "text", "error"]);
    assert.equal(log[1]!.content, events[0]!.content);
  });
});

describe("concurrency, disconnects, rejoining, cancel", () => {
  test("a second send with mode reject while a run is active is aborted naming the active run; never interleaved", async () => {
    const s = await newSession("scripted/x");
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "one" },
      { type: "wait", until: hold.promise },
      { type: "text", text: "two" },
    ]);
    const first = h.sessions
      .sendMessages({ id: s.id, messages: [user("first")] }, h.as(s.caller))
      [Symbol.asyncIterator]();
    const got = await first.next();
    assert.equal(got.value?.type, "text");
    await assert.rejects(
      collect(h.sessions.sendMessages({ id: s.id, messages: [user("second")], mode: "reject" }, h.as(s.caller))),
      (err: unknown) => {
        const e = ConnectError.from(err);
        assert.equal(e.code, Code.Aborted);
        assert.match(e.rawMessage, /active run [0-9a-f-]{36}/);
        return true;
      },
    );
    const running = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(running.session?.status, "running");
    hold.open();
    const rest: SessionEvent[] = [];
    for (let r = await first.next(); !r.done; r = await first.next()) rest.push(r.value);
    assert.deepEqual(types(rest), ["text", "done"]);
    const { events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(types(events), ["user", "text", "text", "done"], "the rejected message was not logged");
  });

  test("the run goes on after the client disconnects; a rejoin with after gets missed and live events", async () => {
    const s = await newSession("scripted/x");
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "a" },
      { type: "text", text: "b" },
      { type: "wait", until: hold.promise },
      { type: "text", text: "c" },
    ]);
    const abort = new AbortController();
    const stream = h.sessions.sendMessages(
      { id: s.id, messages: [user("go")] },
      { ...h.as(s.caller), signal: abort.signal },
    );
    const seen: SessionEvent[] = [];
    for await (const e of stream) {
      seen.push(e);
      break; // the client goes away after the first event
    }
    abort.abort();
    assert.deepEqual(
      seen.map((e) => e.content),
      ["a"],
    );
    const rejoin = h.sessions.streamEvents({ id: s.id, after: seen[0]!.seq }, h.as(s.caller))[Symbol.asyncIterator]();
    const missed = await rejoin.next();
    assert.equal(missed.value?.content, "b");
    hold.open();
    const rest: SessionEvent[] = [];
    for (let r = await rejoin.next(); !r.done; r = await rejoin.next()) rest.push(r.value);
    assert.deepEqual(types(rest), ["text", "done"]);
    assert.equal(rest[0]!.content, "c");
    const { events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(types(events), ["user", "text", "text", "text", "done"]);
    assertGapless(events);
  });

  test("Last-Event-ID header works like after", async () => {
    const s = await newSession();
    const events = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [user("one two three")] }, h.as(s.caller)),
    );
    const replay = await collect(
      h.sessions.streamEvents(
        { id: s.id },
        { headers: { ...h.as(s.caller).headers, "last-event-id": String(events[1]!.seq) } },
      ),
    );
    assert.deepEqual(
      replay.map((e) => e.seq),
      events.slice(2).map((e) => e.seq),
    );
  });

  test("rejoining a finished run replays to its terminal event and closes", async () => {
    const s = await newSession();
    await collect(h.sessions.sendMessages({ id: s.id, messages: [user("a b")] }, h.as(s.caller)));
    const replay = await collect(h.sessions.streamEvents({ id: s.id, after: 0n }, h.as(s.caller)));
    assert.equal(replay[0]?.type, "user");
    assert.equal(replay.at(-1)?.type, "done");
    assertGapless(replay);
    const nothing = await collect(h.sessions.streamEvents({ id: s.id, after: replay.at(-1)!.seq }, h.as(s.caller)));
    assert.deepEqual(nothing, []);
    const other = h.identity.caller();
    await assert.rejects(collect(h.sessions.streamEvents({ id: s.id }, h.as(other))), /not found/);
  });

  test("cancel stops the active run with an error event; cancel without a run says so", async () => {
    const s = await newSession("scripted/x");
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "working" },
      { type: "wait", until: hold.promise },
      { type: "text", text: "never" },
    ]);
    const stream = h.sessions
      .sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller))
      [Symbol.asyncIterator]();
    assert.equal((await stream.next()).value?.content, "working");
    const res = await h.sessions.cancelRun({ id: s.id }, h.as(s.caller));
    assert.equal(res.cancelled, true);
    const rest: SessionEvent[] = [];
    for (let r = await stream.next(); !r.done; r = await stream.next()) rest.push(r.value);
    assert.deepEqual(types(rest), ["error"]);
    assert.match(rest[0]!.content, /cancelled/);
    hold.open();
    await h.app.runner.idle();
    const again = await h.sessions.cancelRun({ id: s.id }, h.as(s.caller));
    assert.equal(again.cancelled, false);
    const { session, events } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(session?.status, "idle");
    assert.deepEqual(types(events), ["user", "text", "error"]);
    // The session takes a new run after a cancel.
    const next = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("again")] }, h.as(s.caller)));
    assert.equal(next.at(-1)?.type, "done");
  });

  test("a cancelled tool call gets an error result in the next model call's history", async () => {
    const s = await newSession("scripted/x");
    h.scripted.push([{ type: "tool_use", call: { id: "c9", name: "bash", input: { command: "hang" } } }]);
    const stream = h.sessions
      .sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller))
      [Symbol.asyncIterator]();
    assert.equal((await stream.next()).value?.type, "tool_use");
    await h.sessions.cancelRun({ id: s.id }, h.as(s.caller));
    for (let r = await stream.next(); !r.done; r = await stream.next());
    await h.app.runner.idle();
    const before = h.scripted.requests.length;
    await collect(h.sessions.sendMessages({ id: s.id, messages: [user("next")] }, h.as(s.caller)));
    const messages = h.scripted.requests[before]!.messages;
    assert.deepEqual(messages[2], {
      role: "tool",
      toolUseId: "c9",
      content: '{"error":"the tool call did not complete"}',
      isError: true,
    });
  });
});

describe("readiness", () => {
  test("ready while database and identity answer; not ready once identity stops", async () => {
    assert.equal(await h.app.ready(), true);
    await h.identity.stop();
    assert.equal(await h.app.ready(), false);
    await h.identity.start();
  });
});

describe("shutdown", () => {
  test("stop ends active runs with an error event and refuses new ones", async () => {
    const local = await h.replica();
    try {
      const caller = h.identity.caller();
      const as = h.as(caller);
      const { agent } = await local.agents.createAgent({ name: "s", slug: "s", model: "scripted/x" }, as);
      const { session } = await local.sessions.createSession({ agentId: agent!.id }, as);
      h.scripted.push([
        { type: "text", text: "working" },
        { type: "wait", until: new Promise(() => {}) },
      ]);
      const stream = local.sessions
        .sendMessages({ id: session!.id, messages: [user("go")] }, as)
        [Symbol.asyncIterator]();
      assert.equal((await stream.next()).value?.content, "working");
      await local.app.stop();
      const rest: SessionEvent[] = [];
      for (let r = await stream.next(); !r.done; r = await stream.next()) rest.push(r.value);
      assert.deepEqual(types(rest), ["error"]);
      assert.match(rest[0]!.content, /shutting down/);
      await assert.rejects(
        collect(local.sessions.sendMessages({ id: session!.id, messages: [user("more")] }, as)),
        (err: unknown) => {
          assert.equal(ConnectError.from(err).code, Code.Unavailable);
          return true;
        },
      );
      // Another replica takes the session at once: the stopped run freed it.
      const next = await collect(h.sessions.sendMessages({ id: session!.id, messages: [user("elsewhere")] }, as));
      assert.equal(next.at(-1)?.type, "done");
    } finally {
      await local.app.stop();
    }
  });
});
