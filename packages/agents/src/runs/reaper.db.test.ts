import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { SessionEvent } from "@platform/gen/agents/v1/agents_pb";
import { sql } from "kysely";
import { collect, type Harness, startHarness } from "../testing/harness.ts";
import { RUN_INTERRUPTED, TOOL_INTERRUPTED } from "./reaper.ts";

// A run whose process died, made by hand: it holds its session, its log ends
// with a tool call and no result. Here the periodic sweep is an hour apart,
// so what ends it is what this test does: a send to the session, or a
// follower waiting for the run's end (crash.db.test.ts kills real processes).

let h: Harness;
before(async () => {
  h = await startHarness({ sweepMs: 3_600_000, pollMs: 100 });
});
after(async () => {
  await h?.close();
});

/** A session whose run (of a process that is gone) stored a user message and a tool call, with `leaseMs` left. */
async function sessionWithDeadRun(leaseMs: number) {
  const caller = h.identity.caller();
  const { agent } = await h.agents.createAgent(
    { name: "d", slug: `d-${randomUUID()}`, model: "dev/echo", systemPrompt: "" },
    h.as(caller),
  );
  const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(caller));
  const runId = randomUUID();
  const taken = await h.app.store.acquireRun(caller.orgId, session!.id, runId, 60_000, "gone:1#dead");
  assert.equal(taken.ok, true);
  const at = new Date();
  const base = { tokensIn: 0, tokensOut: 0, isError: false, createdAt: at, runId };
  await h.app.store.storeEvents(session!.id, runId, [
    { ...base, seq: 1, type: "user", content: "run: hang", toolUseId: "" },
    {
      ...base,
      seq: 2,
      type: "tool_use",
      content: '{"name":"bash","input":{"command":"hang"}}',
      toolUseId: "toolu_dead",
    },
  ]);
  await sql`update sessions set run_lease_until = now() + make_interval(secs => ${leaseMs / 1000}) where id = ${session!.id}`.execute(
    h.database.db,
  );
  return { caller, id: session!.id, runId };
}

const ended = (events: SessionEvent[]) => events.map((e) => [e.seq, e.type, e.toolUseId, e.isError, e.content]);

describe("a dead run", () => {
  test("a send to its session ends it first (the in-flight tool call reported interrupted), then runs", async () => {
    const s = await sessionWithDeadRun(-1000);
    const events = await collect(
      h.sessions.sendMessages({ id: s.id, messages: [{ role: "user", content: "hello" }] }, h.as(s.caller)),
    );
    assert.equal(events.at(-1)?.type, "done");
    const { events: log, session } = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.deepEqual(ended(log.slice(2, 4)), [
      [3n, "tool_result", "toolu_dead", true, TOOL_INTERRUPTED],
      [4n, "error", "", false, RUN_INTERRUPTED],
    ]);
    assert.equal(log[4]?.type, "user");
    assert.equal(session?.status, "idle");
  });

  test("a client following it (resumed after its last event) gets its end once the lease lapses, and the stream closes", async () => {
    const s = await sessionWithDeadRun(1500);
    const busy = await h.sessions.getSession({ id: s.id }, h.as(s.caller));
    assert.equal(busy.session?.status, "running", "its lease still holds");
    const started = Date.now();
    const rest = await collect(h.sessions.streamEvents({ id: s.id, after: 2n }, h.as(s.caller)));
    assert.deepEqual(ended(rest), [
      [3n, "tool_result", "toolu_dead", true, TOOL_INTERRUPTED],
      [4n, "error", "", false, RUN_INTERRUPTED],
    ]);
    assert.ok(Date.now() - started >= 1000, "not before its lease lapsed");
    assert.equal((await h.sessions.getSession({ id: s.id }, h.as(s.caller))).session?.status, "idle");
  });

  test("the sweep ends every dead run not of this process, and only those", async () => {
    const dead = await sessionWithDeadRun(-1000);
    const live = await sessionWithDeadRun(60_000);
    const reaped = await h.app.recover();
    assert.ok(reaped >= 1);
    const log = (await h.sessions.getSession({ id: dead.id }, h.as(dead.caller))).events;
    assert.equal(log.at(-1)?.content, RUN_INTERRUPTED);
    const other = await h.sessions.getSession({ id: live.id }, h.as(live.caller));
    assert.equal(other.session?.status, "running", "a live lease of another replica is left alone");
    assert.equal(other.events.length, 2);
  });
});
