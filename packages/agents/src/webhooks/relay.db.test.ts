// Issue 25: the session events organizations' webhooks hear of are copied
// into webhook_relay when they are stored (a trigger, same transaction), and
// the relay hands them to identity (here a recording sink) and deletes them.
// Identity refusing or unreachable: the rows wait; a new relay (a restarted
// process) sends them; two relays never send a row twice at once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { sql } from "kysely";
import pino from "pino";
import { collect, type Harness, startHarness } from "../testing/index.ts";
import { WebhookRelay, type WebhookSink } from "./relay.ts";

const logger = pino({ level: "silent" });
let h: Harness;

before(async () => {
  h = await startHarness();
});
after(async () => {
  await h?.close();
});

type Sent = Parameters<WebhookSink["publish"]>[0][number];

/** A sink that records what it took, or refuses while `down`. */
function sink() {
  const sent: Sent[] = [];
  const s = {
    down: false,
    sent,
    async publish(events: readonly Sent[]) {
      await new Promise((r) => setTimeout(r, 5));
      if (s.down) throw new Error("identity unavailable");
      sent.push(...events);
      return events.length;
    },
  };
  return s;
}

async function runTurn() {
  const caller = h.identity.caller();
  const { agent } = await h.agents.createAgent(
    { name: "a", slug: `a-${crypto.randomUUID()}`, model: "dev/echo" },
    h.as(caller),
  );
  const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(caller));
  await collect(
    h.sessions.sendMessages({ id: session!.id, messages: [{ role: "user", content: "hi" }] }, h.as(caller)),
  );
  return { caller, agentId: agent!.id, sessionId: session!.id };
}

const waiting = async () =>
  Number(
    (
      await h.database.db
        .selectFrom("webhook_relay")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow()
    ).n,
  );

/** A stored event written as the log writes it (next seq of the session). */
async function storeEvent(sessionId: string, type: string, content: string) {
  await sql`
    insert into session_events (session_id, seq, type, content)
    select ${sessionId}::uuid, coalesce(max(seq), 0) + 1, ${type}, ${content} from session_events where session_id = ${sessionId}::uuid
  `.execute(h.database.db);
}

describe("webhook relay", () => {
  test("a finished run's done is relayed as session.idle; text is not; identity down: nothing lost; a restarted relay sends it once", async () => {
    // Drain whatever earlier files' rows this database holds.
    await new WebhookRelay(h.database.db, sink(), logger).runOnce();
    const { agentId, sessionId, caller } = await runTurn();
    const rows = await h.database.db.selectFrom("webhook_relay").selectAll().execute();
    assert.deepEqual(
      rows.map((r) => [r.type, r.session_id, r.org_id]),
      [["done", sessionId, caller.orgId]],
      "only the run's terminal event is copied",
    );
    await storeEvent(
      sessionId,
      "sandbox_replaced",
      JSON.stringify({ previousSandboxId: "s1", sandboxId: "s2", reason: "failed" }),
    );
    await storeEvent(
      sessionId,
      "sandbox_replaced",
      JSON.stringify({ previousSandboxId: "s2", sandboxId: "s3", reason: "destroyed" }),
    );
    await storeEvent(sessionId, "error", "the model provider failed");
    await storeEvent(sessionId, "budget_reached", JSON.stringify({ budget: "maxTokens", limit: 10, used: 12 }));
    assert.equal(await waiting(), 4, "done, the failed replacement, error, budget_reached");

    const down = sink();
    down.down = true;
    const first = new WebhookRelay(h.database.db, down, logger, { retryMs: 0 });
    assert.equal(await first.runOnce(), 0);
    assert.equal(await waiting(), 4, "identity refused: the rows wait");
    await first.stop();

    // The process restarts; identity is back.
    const up = sink();
    const second = new WebhookRelay(h.database.db, up, logger);
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(await second.runOnce(), 4);
    assert.equal(await waiting(), 0);
    assert.equal(await second.runOnce(), 0);
    assert.deepEqual(
      up.sent.map((e) => e.type),
      ["session.idle", "sandbox.failed", "run.failed", "session.budget_reached"],
    );
    const [idle, failed, runFailed, budget] = up.sent;
    assert.equal(idle!.orgId, caller.orgId);
    assert.equal(idle!.data.session_id, sessionId);
    assert.equal(idle!.data.agent_id, agentId);
    assert.ok(typeof idle!.data.tokens_out === "number");
    assert.deepEqual([failed!.data.previous_sandbox_id, failed!.data.sandbox_id], ["s1", "s2"]);
    assert.equal(runFailed!.data.error, "the model provider failed");
    assert.deepEqual(budget!.data.budget, { budget: "maxTokens", limit: 10, used: 12 });
    assert.equal(new Set(up.sent.map((e) => e.id)).size, 4, "each event has its own id");
  });

  test("the relay's trigger function runs only for the types it relays: a text token's commit does not call it", async () => {
    const { sessionId } = await runTurn();
    // Function call counts of this transaction (track_functions), then rolled back.
    const calls = await h.database.db
      .transaction()
      .execute(async (tx) => {
        await sql`set local track_functions = 'pl'`.execute(tx);
        const count = async () =>
          Number(
            (
              await sql<{ calls: string }>`
                select coalesce(sum(calls), 0) as calls from pg_stat_xact_user_functions where funcname = 'agents_webhook_relay'
              `.execute(tx)
            ).rows[0]!.calls,
          );
        const insert = (type: string) =>
          sql`
          insert into session_events (session_id, seq, type, content)
          select ${sessionId}::uuid, coalesce(max(seq), 0) + 1, ${type}, 'x' from session_events where session_id = ${sessionId}::uuid
        `.execute(tx);
        await insert("text");
        await insert("tool_use");
        const afterText = await count();
        await insert("error");
        const afterError = await count();
        throw Object.assign(new Error("rollback"), { counts: [afterText, afterError] });
      })
      .catch((e: { counts?: number[] }) => {
        if (!e.counts) throw e;
        return e.counts;
      });
    assert.deepEqual(calls, [0, 1]);
  });

  test("four relays sharing the table: each event sent once", async () => {
    const { sessionId } = await runTurn();
    await new WebhookRelay(h.database.db, sink(), logger).runOnce();
    for (let i = 0; i < 40; i++) await storeEvent(sessionId, "error", `e${i}`);
    const shared = sink();
    const relays = [1, 2, 3, 4].map(() => new WebhookRelay(h.database.db, shared, logger, { batch: 3 }));
    let sent = 0;
    for (let round = 0; round < 40 && sent < 40; round++)
      sent += (await Promise.all(relays.map((r) => r.runOnce()))).reduce((x, y) => x + y, 0);
    assert.equal(sent, 40);
    assert.equal(new Set(shared.sent.map((e) => e.id)).size, 40);
    assert.equal(shared.sent.length, 40, "no event sent twice");
  });
});
