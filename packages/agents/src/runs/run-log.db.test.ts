import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { SessionEvent } from "@platform/gen/agents/v1/agents_pb";
import { collect, type Harness, startHarness } from "../testing/harness.ts";
import { gate } from "../testing/scripted-model.ts";

// A run stores each event before it publishes it (grouping what arrives
// while a store is out): whatever a client was streamed is in the log with
// the same seq, content and time, at every moment of the run.

let h: Harness;
before(async () => {
  h = await startHarness({ runLeaseMs: 5000 });
});
after(async () => {
  await h?.close();
});

async function newSession() {
  const caller = h.identity.caller();
  const { agent } = await h.agents.createAgent(
    { name: "b", slug: `b-${Math.random()}`, model: "scripted/x", systemPrompt: "" },
    h.as(caller),
  );
  const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(caller));
  return { caller, id: session!.id };
}

const user = (content: string) => ({ role: "user", content });
const types = (events: SessionEvent[]) => events.map((e) => e.type);
/** Everything a replay must repeat of a live event. */
const shape = (e: SessionEvent) => [
  e.seq,
  e.type,
  e.content,
  e.toolUseId,
  e.isError,
  e.tokensIn,
  e.tokensOut,
  e.createdAt?.seconds,
  e.createdAt?.nanos,
];

async function rest(it: AsyncIterator<SessionEvent>): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for (let r = await it.next(); !r.done; r = await it.next()) out.push(r.value);
  return out;
}

async function logOf(s: { id: string; caller: { token: string } }): Promise<SessionEvent[]> {
  return (await h.sessions.getSession({ id: s.id }, h.as(s.caller))).events;
}

describe("store first, then publish", () => {
  test("a streamed fragment is in the log already; a late follower gets the same; the log replays the same seqs, contents and times", async () => {
    const s = await newSession();
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "a" },
      { type: "text", text: "b" },
      { type: "wait", until: hold.promise },
      { type: "text", text: "c" },
    ]);
    const live = h.sessions.sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller))[Symbol.asyncIterator]();
    const first = [(await live.next()).value!, (await live.next()).value!];
    assert.deepEqual(
      first.map((e) => e.content),
      ["a", "b"],
    );
    assert.deepEqual(
      (await logOf(s)).map(shape),
      [(await logOf(s))[0]!, ...first].map(shape),
      "what the client was streamed is stored, as streamed",
    );

    const late = h.sessions.streamEvents({ id: s.id, after: 0n }, h.as(s.caller))[Symbol.asyncIterator]();
    const joined = [(await late.next()).value!, (await late.next()).value!, (await late.next()).value!];
    assert.deepEqual(
      joined.map((e) => [e.seq, e.content]),
      [
        [1n, "go"],
        [2n, "a"],
        [3n, "b"],
      ],
    );

    hold.open();
    const events = [...first, ...(await rest(live))];
    const lateRest = await rest(late);
    assert.deepEqual(types(events), ["text", "text", "text", "done"]);
    assert.deepEqual(
      events.map(shape),
      [...joined.slice(1), ...lateRest].map(shape),
      "the late follower saw what the sender saw",
    );
    const log = await logOf(s);
    assert.deepEqual(log.slice(1).map(shape), events.map(shape), "stored at the turn's end, as streamed");
    for (const [i, e] of log.entries()) assert.equal(e.seq, BigInt(i + 1));
    const replay = await collect(h.sessions.streamEvents({ id: s.id, after: 1n }, h.as(s.caller)));
    assert.deepEqual(replay.map(shape), events.map(shape), "a replay repeats the live stream");
  });

  test("every fragment is its own event, in order, nothing lost", async () => {
    const s = await newSession();
    const words = Array.from({ length: 50 }, (_, i) => `w${i} `);
    h.scripted.push(
      [
        ...words.map((text) => ({ type: "text" as const, text })),
        { type: "tool_use", call: { id: "c", name: "list_files", input: {} } },
      ],
      [{ type: "text", text: "after" }],
    );
    const events = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller)));
    assert.deepEqual(
      events.slice(0, 50).map((e) => e.content),
      words,
    );
    assert.deepEqual(types(events).slice(50), ["tool_use", "tool_result", "text", "done"]);
    assert.deepEqual((await logOf(s)).slice(1).map(shape), events.map(shape));
  });

  test("a cancel ends the run with an error event after the stored fragments", async () => {
    const s = await newSession();
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "one" },
      { type: "text", text: "two" },
      { type: "wait", until: hold.promise },
    ]);
    const live = h.sessions.sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller))[Symbol.asyncIterator]();
    await live.next();
    await live.next();
    assert.deepEqual(types(await logOf(s)), ["user", "text", "text"]);
    await h.sessions.cancelRun({ id: s.id }, h.as(s.caller));
    const end = await rest(live);
    hold.open();
    assert.deepEqual(types(end), ["error"]);
    const log = await logOf(s);
    assert.deepEqual(
      log.map((e) => [e.seq, e.type, e.content]),
      [
        [1n, "user", "go"],
        [2n, "text", "one"],
        [3n, "text", "two"],
        [4n, "error", end[0]!.content],
      ],
    );
    assert.equal((await h.sessions.getSession({ id: s.id }, h.as(s.caller))).session?.status, "idle");
  });

  test("a model failure mid-stream stores the partial output before the error event", async () => {
    const s = await newSession();
    h.scripted.push([
      { type: "text", text: "partial" },
      { type: "text", text: " more" },
      { type: "throw", message: "the model went away" },
    ]);
    const events = await collect(h.sessions.sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller)));
    assert.deepEqual(types(events), ["text", "text", "error"]);
    assert.deepEqual((await logOf(s)).slice(1).map(shape), events.map(shape));
  });

  test("a shutdown ends the run with an error event after its stored fragments", async () => {
    const other = await h.replica();
    const caller = h.identity.caller();
    const { agent } = await other.agents.createAgent(
      { name: "s", slug: "shutdown", model: "scripted/x", systemPrompt: "" },
      h.as(caller),
    );
    const { session } = await other.sessions.createSession({ agentId: agent!.id }, h.as(caller));
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "kept" },
      { type: "wait", until: hold.promise },
    ]);
    const live = other.sessions
      .sendMessages({ id: session!.id, messages: [user("go")] }, h.as(caller))
      [Symbol.asyncIterator]();
    assert.equal((await live.next()).value?.content, "kept");
    await other.app.stop();
    hold.open();
    assert.deepEqual(types(await rest(live)), ["error"]);
    const log = await logOf({ id: session!.id, caller });
    assert.deepEqual(types(log), ["user", "text", "error"]);
  });

  test("a follower on another replica (no notifications: the shared poll) receives every event the sender saw", async () => {
    const s = await newSession();
    const b = await h.replica();
    try {
      const hold = gate();
      h.scripted.push([
        { type: "text", text: "x" },
        { type: "wait", until: hold.promise },
        { type: "text", text: "y" },
        { type: "text", text: "z" },
      ]);
      const live = h.sessions
        .sendMessages({ id: s.id, messages: [user("go")] }, h.as(s.caller))
        [Symbol.asyncIterator]();
      const first = (await live.next()).value!;
      const follower = b.sessions.streamEvents({ id: s.id, after: 0n }, h.as(s.caller))[Symbol.asyncIterator]();
      assert.equal((await follower.next()).value?.type, "user", "B reads what is stored");
      hold.open();
      const events = [first, ...(await rest(live))];
      const seen = await rest(follower);
      assert.deepEqual(types(events), ["text", "text", "text", "done"]);
      assert.deepEqual(seen.map(shape), events.map(shape));
    } finally {
      await b.app.stop();
    }
  });
});
