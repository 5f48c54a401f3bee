import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { KyselyIdleSandboxStore } from "../db/idle-sandbox-store.ts";
import { collect, deadUrl, gate, type Harness, startHarness } from "../testing/index.ts";
import { IdleSandboxSweeper } from "./idle-sandboxes.ts";

// The sandboxes of idle sessions are destroyed through compute (a double
// served over real gRPC, as in the other agents tests) and forgotten by the
// session; the database is the sweep's only state.

const IDLE_MS = 400;
const logger = pino({ level: "silent" });
let h: Harness;

before(async () => {
  h = await startHarness();
});
after(async () => {
  await h?.close();
});

/** A caller's new session whose first turn ran a bash tool call (so it has a sandbox). */
async function sessionWithSandbox(model = "dev/echo") {
  if (model.startsWith("scripted/")) {
    h.scripted.push([
      { type: "tool_use", call: { id: "toolu_1", name: "bash", input: { command: "echo hi" } } },
      { type: "stop", reason: "tool_use" },
    ]);
  }
  const caller = h.identity.caller();
  const { agent } = await h.agents.createAgent({ name: "a", slug: `a-${crypto.randomUUID()}`, model }, h.as(caller));
  const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(caller));
  const events = await collect(
    h.sessions.sendMessages({ id: session!.id, messages: [{ role: "user", content: "run: echo hi" }] }, h.as(caller)),
  );
  assert.ok(
    events.some((e) => e.type === "tool_result"),
    events.map((e) => `${e.type}: ${e.content}`).join("\n"),
  );
  const { session: now } = await h.sessions.getSession({ id: session!.id }, h.as(caller));
  assert.ok(now!.sandboxId, "the tool call made a sandbox");
  return { caller, sessionId: session!.id, sandboxId: now!.sandboxId };
}

const sweeper = (idleMs = IDLE_MS, sandboxes = new ComputeSandboxes(grpcTransport(h.computeUrl))) =>
  new IdleSandboxSweeper(
    new KyselyIdleSandboxStore(h.database.db),
    sandboxes,
    { idleMs, intervalMs: 3_600_000 },
    logger,
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("idle sessions' sandboxes", () => {
  test("destroyed once the session has been idle for the period, not before; the next tool call gets a new sandbox", async () => {
    const { caller, sessionId, sandboxId } = await sessionWithSandbox();
    // Idle for less than the period: kept.
    await sweeper(60_000).sweep();
    assert.ok(!h.compute.destroyCalls.includes(sandboxId));

    await sleep(IDLE_MS + 200);
    assert.ok((await sweeper().sweep()) >= 1);
    assert.ok(h.compute.destroyCalls.includes(sandboxId), "DestroySandbox was called");
    const { session } = await h.sessions.getSession({ id: sessionId }, h.as(caller));
    assert.equal(session!.sandboxId, "", "the session no longer names the destroyed sandbox");

    const creates = h.compute.createCalls.length;
    const events = await collect(
      h.sessions.sendMessages(
        { id: sessionId, messages: [{ role: "user", content: "run: echo again" }] },
        h.as(caller),
      ),
    );
    const result = events.find((e) => e.type === "tool_result");
    assert.ok(result && !result.isError, events.map((e) => `${e.type}: ${e.content}`).join("\n"));
    assert.equal(h.compute.createCalls.length, creates + 1, "a new sandbox for the session");
    const { session: later } = await h.sessions.getSession({ id: sessionId }, h.as(caller));
    assert.ok(later!.sandboxId && later!.sandboxId !== sandboxId);
  });

  test("a session a run holds keeps its sandbox however long the run is quiet", async () => {
    const { caller, sessionId, sandboxId } = await sessionWithSandbox("scripted/x");
    const hold = gate();
    h.scripted.push([
      { type: "text", text: "thinking" },
      { type: "wait", until: hold.promise },
      { type: "stop", reason: "end_turn" },
    ]);
    const stream = h.sessions
      .sendMessages({ id: sessionId, messages: [{ role: "user", content: "take your time" }] }, h.as(caller))
      [Symbol.asyncIterator]();
    // The run holds the session once its first text arrived.
    for (let next = await stream.next(); ; next = await stream.next()) {
      assert.ok(!next.done, "the run ended before its text");
      if (next.value.type === "text") break;
    }
    await sleep(IDLE_MS + 200);
    await sweeper().sweep();
    assert.ok(!h.compute.destroyCalls.includes(sandboxId), "not destroyed under a running run");
    hold.open();
    while (!(await stream.next()).done);
    // Idle again only from the run's end.
    await sweeper().sweep();
    assert.ok(!h.compute.destroyCalls.includes(sandboxId));
  });

  test("after a restart: a new sweeper finds sessions that went idle meanwhile at its start, from the database alone", async () => {
    const { sandboxId } = await sessionWithSandbox();
    await sleep(IDLE_MS + 200);
    // A fresh sweeper (a restarted service) with an hour between rounds: its start sweeps.
    const restarted = sweeper();
    restarted.start();
    await restarted.sweep();
    await restarted.stop();
    assert.ok(h.compute.destroyCalls.includes(sandboxId));
  });

  test("compute unreachable: the session keeps naming its sandbox and a later round destroys it", async () => {
    const { caller, sessionId, sandboxId } = await sessionWithSandbox();
    await sleep(IDLE_MS + 200);
    assert.equal(await sweeper(IDLE_MS, new ComputeSandboxes(grpcTransport(await deadUrl()))).sweep(), 0);
    const { session } = await h.sessions.getSession({ id: sessionId }, h.as(caller));
    assert.equal(session!.sandboxId, sandboxId, "not forgotten while it could not be destroyed");
    assert.ok(!h.compute.destroyCalls.includes(sandboxId));

    await sweeper().sweep();
    assert.ok(h.compute.destroyCalls.includes(sandboxId));
    const { session: later } = await h.sessions.getSession({ id: sessionId }, h.as(caller));
    assert.equal(later!.sandboxId, "");
  });

  test("the service sweeps by itself with sandboxIdleMs set (AGENTS_SANDBOX_IDLE_MS), and not without it", async () => {
    const { sandboxId: kept } = await sessionWithSandbox();
    const own = await startHarness({ sandboxIdleMs: IDLE_MS });
    try {
      const caller = own.identity.caller();
      const { agent } = await own.agents.createAgent({ name: "a", slug: "a", model: "dev/echo" }, own.as(caller));
      const { session } = await own.sessions.createSession({ agentId: agent!.id }, own.as(caller));
      await collect(
        own.sessions.sendMessages(
          { id: session!.id, messages: [{ role: "user", content: "run: echo hi" }] },
          own.as(caller),
        ),
      );
      const { session: withSandbox } = await own.sessions.getSession({ id: session!.id }, own.as(caller));
      assert.ok(withSandbox!.sandboxId);
      // Rounds every second (the minimum): destroyed within a few of them.
      const deadline = Date.now() + 20_000;
      while (!own.compute.destroyCalls.includes(withSandbox!.sandboxId) && Date.now() < deadline) await sleep(100);
      assert.ok(own.compute.destroyCalls.includes(withSandbox!.sandboxId), "destroyed by the service's own sweep");
      // The sweep destroys first and forgets after: the session stops naming the sandbox a moment later.
      const named = async () => (await own.sessions.getSession({ id: session!.id }, own.as(caller))).session!.sandboxId;
      while ((await named()) !== "" && Date.now() < deadline + 20_000) await sleep(100);
      assert.equal(await named(), "");
    } finally {
      await own.close();
    }
    // The shared harness has no sandboxIdleMs: its idle session's sandbox is still there.
    assert.ok(!h.compute.destroyCalls.includes(kept));
  });
});
