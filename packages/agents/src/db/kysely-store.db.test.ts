import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { type Database, migrate } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { Code, PlatformError } from "@platform/errors";
import { sql } from "kysely";
import pg from "pg";
import { EVENTS_CHANNEL, KyselyStore } from "./kysely-store.ts";
import { NOTIFY_WINDOW_MS } from "./notify-pacer.ts";
import { MIGRATIONS_TABLE, migrations } from "./migrations.ts";
import type { AgentsDB } from "./schema.ts";

let database: Database<AgentsDB> & { url?: string };
let store: KyselyStore;
before(async () => {
  database = await createTestDatabase<AgentsDB>();
  await migrate(database as Database<unknown>, MIGRATIONS_TABLE, migrations);
  store = new KyselyStore(database.db);
});
after(() => database?.close());

const agent = (orgId: string, slug: string) =>
  store.createAgent({ orgId, name: slug, slug, model: "dev/x", systemPrompt: "" });

test("migrations apply once", async () => {
  assert.deepEqual(await migrate(database as Database<unknown>, MIGRATIONS_TABLE, migrations), []);
});

test("slug is unique per org: already_exists, other orgs unaffected", async () => {
  const org = randomUUID();
  await agent(org, "same");
  await assert.rejects(
    agent(org, "same"),
    (err: unknown) => err instanceof PlatformError && err.code === Code.AlreadyExists,
  );
  await agent(randomUUID(), "same");
});

test("reads are org-scoped: another org's agent, session and events are invisible", async () => {
  const org = randomUUID();
  const other = randomUUID();
  const a = await agent(org, "scoped");
  const s = await store.createSession(org, a.id);
  await store.appendEvents(s.id, undefined, [{ type: "user", content: "secret" }]);
  assert.equal(await store.getAgent(other, a.id), undefined);
  assert.equal(await store.getSession(other, s.id), undefined);
  assert.deepEqual(await store.listEvents(other, s.id), []);
  assert.equal((await store.listEvents(org, s.id)).length, 1);
  assert.equal(await store.requestCancel(other, s.id), undefined);
});

test("the list cursor stays correct while rows are inserted between pages", async () => {
  const org = randomUUID();
  for (let i = 0; i < 6; i++) await agent(org, `a${i}`);
  const seen: string[] = [];
  let page = await store.listAgents(org, 2);
  seen.push(...page.items.map((a) => a.slug));
  let inserted = 0;
  while (page.next) {
    // New rows arrive between every page; they sort before the cursor.
    await agent(org, `new${inserted++}`);
    page = await store.listAgents(org, 2, page.next);
    seen.push(...page.items.map((a) => a.slug));
  }
  assert.deepEqual(seen, ["a5", "a4", "a3", "a2", "a1", "a0"], "no row repeated or skipped");
  const fresh = await store.listAgents(org, 100);
  assert.equal(fresh.items.length, 6 + inserted);
  assert.equal(fresh.next, undefined);
  assert.deepEqual(
    fresh.items.slice(0, inserted).map((a) => a.slug),
    Array.from({ length: inserted }, (_, i) => `new${inserted - 1 - i}`),
  );
});

test("a page that exactly fills the limit has no next cursor", async () => {
  const org = randomUUID();
  await agent(org, "x");
  await agent(org, "y");
  const page = await store.listAgents(org, 2);
  assert.equal(page.items.length, 2);
  assert.equal(page.next, undefined);
});

test("concurrent appends to one session get gapless, unique seqs in order", async () => {
  const org = randomUUID();
  const a = await agent(org, "seq");
  const s = await store.createSession(org, a.id);
  const writers = 12;
  const batches = await Promise.all(
    Array.from({ length: writers }, (_, w) =>
      store.appendEvents(s.id, undefined, [
        { type: "text", content: `${w}.0` },
        { type: "text", content: `${w}.1` },
        { type: "text", content: `${w}.2` },
      ]),
    ),
  );
  const seqs = batches
    .flat()
    .map((e) => e.seq)
    .sort((x, y) => x - y);
  assert.deepEqual(
    seqs,
    Array.from({ length: writers * 3 }, (_, i) => i + 1),
  );
  for (const batch of batches) {
    assert.deepEqual(
      batch.map((e) => e.seq - batch[0]!.seq),
      [0, 1, 2],
      "a batch is contiguous",
    );
    assert.deepEqual(
      batch.map((e) => e.content.split(".")[1]),
      ["0", "1", "2"],
    );
  }
  const session = await store.getSession(org, s.id);
  assert.equal(session?.lastSeq, writers * 3);
  assert.deepEqual(
    (await store.listEvents(org, s.id, 30)).map((e) => e.seq),
    [31, 32, 33, 34, 35, 36],
  );
});

test("appending to a missing session fails and writes nothing", async () => {
  await assert.rejects(store.appendEvents(randomUUID(), undefined, [{ type: "text", content: "x" }]));
});

test("one run holds a session; a lapsed holder must be ended before another run takes it; release frees it", async () => {
  const org = randomUUID();
  const a = await agent(org, "lease");
  const s = await store.createSession(org, a.id);
  const r1 = randomUUID();
  const r2 = randomUUID();
  const first = await store.acquireRun(org, s.id, r1, 60_000, "host:1#p1");
  assert.equal(first.ok, true);
  const second = await store.acquireRun(org, s.id, r2, 60_000);
  assert.deepEqual(second, { ok: false, activeRunId: r1, lapsed: false });
  assert.equal((await store.getSession(org, s.id))?.status, "running");
  assert.deepEqual(await store.acquireRun(randomUUID(), s.id, r2, 60_000), { ok: false, missing: true });
  assert.deepEqual(await store.deadRuns({ lapsed: true }, 10, s.id), [], "a live lease is not dead");

  // r1 "dies": its lease is made to lapse.
  await database.db
    .updateTable("sessions")
    .set({ run_lease_until: new Date(Date.now() - 1000) })
    .where("id", "=", s.id)
    .execute();
  const lapsed = await store.getSession(org, s.id);
  assert.equal(lapsed?.status, "idle");
  assert.equal(lapsed?.lapsedRunId, r1);
  assert.deepEqual(
    await store.acquireRun(org, s.id, r2, 60_000),
    { ok: false, activeRunId: r1, lapsed: true },
    "not taken while the dead run has no end",
  );
  assert.deepEqual(await store.deadRuns({ lapsed: true }, 10, s.id), [
    { orgId: org, sessionId: s.id, runId: r1, lastSeq: 0 },
  ]);
  const end = {
    seq: 1,
    type: "error" as const,
    content: "interrupted",
    tokensIn: 0,
    tokensOut: 0,
    toolUseId: "",
    isError: false,
    createdAt: new Date(),
    runId: r1,
  };
  await store.storeEvents(s.id, r1, [end], { release: true, ifDead: { lapsed: true } });
  assert.equal((await store.acquireRun(org, s.id, r2, 60_000)).ok, true);
  assert.deepEqual(
    await store.renewRun(s.id, r1, 60_000),
    { held: false, cancelRequested: false },
    "the old run learns it lost the session",
  );
  await store.releaseRun(s.id, r1); // a stale release changes nothing
  assert.equal((await store.getSession(org, s.id))?.activeRunId, r2);

  assert.equal(await store.requestCancel(org, s.id), r2);
  assert.deepEqual(await store.renewRun(s.id, r2, 60_000), { held: true, cancelRequested: true });
  await store.releaseRun(s.id, r2);
  assert.equal((await store.getSession(org, s.id))?.status, "idle");
  assert.equal(await store.requestCancel(org, s.id), undefined);
});

test("dead runs: a lapsed lease; an earlier process of the same replica (live lease); any other process for the sole process; a takeover writes only while the run is dead", async () => {
  const org = randomUUID();
  const a = await agent(org, "dead");
  const [s1, s2, s3] = [
    await store.createSession(org, a.id),
    await store.createSession(org, a.id),
    await store.createSession(org, a.id),
  ];
  const [old, mine, other] = [randomUUID(), randomUUID(), randomUUID()];
  await store.acquireRun(org, s1!.id, old, 60_000, "host:8082#before");
  await store.acquireRun(org, s2!.id, mine, 60_000, "host:8082#now");
  await store.acquireRun(org, s3!.id, other, 60_000, "host:9000#x");
  const ids = (runs: Array<{ runId: string }>) => runs.map((r) => r.runId).sort();
  const sessions = new Set([s1!.id, s2!.id, s3!.id]);
  const mineOnly = async (by: Parameters<typeof store.deadRuns>[0]) =>
    ids((await store.deadRuns(by, 1000)).filter((r) => sessions.has(r.sessionId)));
  assert.deepEqual(await mineOnly({ lapsed: true }), []);
  assert.deepEqual(await mineOnly({ replica: "host:8082", self: "host:8082#now" }), [old]);
  assert.deepEqual(await mineOnly({ sole: true, self: "host:8082#now" }), [old, other].sort());

  const end = (runId: string) => [
    {
      seq: 1,
      type: "error" as const,
      content: "x",
      tokensIn: 0,
      tokensOut: 0,
      toolUseId: "",
      isError: false,
      createdAt: new Date(),
      runId,
    },
  ];
  await assert.rejects(
    store.storeEvents(s3!.id, other, end(other), { release: true, ifDead: { lapsed: true } }),
    aborted,
    "alive: its lease holds",
  );
  await assert.rejects(
    store.storeEvents(s2!.id, mine, end(mine), {
      release: true,
      ifDead: { replica: "host:8082", self: "host:8082#now" },
    }),
    aborted,
    "this process's own run is alive",
  );
  await store.storeEvents(s1!.id, old, end(old), {
    release: true,
    ifDead: { replica: "host:8082", self: "host:8082#now" },
  });
  assert.equal((await store.getSession(org, s1!.id))?.status, "idle");
});

test("openToolUses: the run's tool calls without a result", async () => {
  const { org, s, run } = await heldSession("open-tools");
  const at = new Date();
  const e = (seq: number, type: "tool_use" | "tool_result" | "text", toolUseId = "", runId = run) => ({
    seq,
    type,
    content: "{}",
    tokensIn: 0,
    tokensOut: 0,
    toolUseId,
    isError: false,
    createdAt: at,
    runId,
  });
  await store.storeEvents(s.id, run, [
    e(1, "tool_use", "a"),
    e(2, "tool_result", "a"),
    e(3, "text"),
    e(4, "tool_use", "b"),
    e(5, "tool_use", "c"),
  ]);
  assert.deepEqual(await store.openToolUses(s.id, run), ["b", "c"]);
  assert.deepEqual(await store.openToolUses(s.id, randomUUID()), []);
  assert.equal((await store.listEvents(org, s.id)).length, 5);
});

test("of many concurrent acquirers exactly one wins", async () => {
  const org = randomUUID();
  const a = await agent(org, "race");
  const s = await store.createSession(org, a.id);
  const results = await Promise.all(
    Array.from({ length: 10 }, () => store.acquireRun(org, s.id, randomUUID(), 60_000)),
  );
  assert.equal(results.filter((r) => r.ok).length, 1);
});

test("the sandbox id is stored on the session", async () => {
  const org = randomUUID();
  const a = await agent(org, "sbx");
  const s = await store.createSession(org, a.id);
  assert.equal(s.sandboxId, undefined);
  await store.setSandbox(s.id, "sbx-1");
  assert.equal((await store.getSession(org, s.id))?.sandboxId, "sbx-1");
});

/** A new session in a new org, held by a new run. */
async function heldSession(slug: string) {
  const org = randomUUID();
  const a = await agent(org, slug);
  const s = await store.createSession(org, a.id);
  const run = randomUUID();
  assert.equal((await store.acquireRun(org, s.id, run, 60_000)).ok, true);
  return { org, s, run };
}

test("the terminal append frees the session in the same statement, only for the holding run", async () => {
  const { org, s, run } = await heldSession("release");
  await store.appendEvents(s.id, randomUUID(), [{ type: "done" }], { release: true });
  assert.equal((await store.getSession(org, s.id))?.activeRunId, run, "another run's terminal event frees nothing");
  await store.appendEvents(s.id, run, [{ type: "text", content: "x" }]);
  assert.equal((await store.getSession(org, s.id))?.status, "running");
  await store.appendEvents(s.id, run, [{ type: "done" }], { release: true });
  const after = await store.getSession(org, s.id);
  assert.equal(after?.status, "idle");
  assert.equal(after?.lastSeq, 3);
});

const STORED_AT = new Date("2026-01-02T03:04:05.678Z");
/** A text event its run numbered, as storeEvents takes it. */
const numbered = (runId: string, seq: number, content: string) => ({
  seq,
  type: "text" as const,
  content,
  tokensIn: 0,
  tokensOut: 0,
  toolUseId: "",
  isError: false,
  createdAt: STORED_AT,
  runId,
});
const aborted = (err: unknown) => err instanceof PlatformError && err.code === Code.Aborted;

test("a run stores the events it numbered, with their seqs and times, only while it holds the session and they follow the log", async () => {
  const { org, s, run } = await heldSession("numbered");
  const event = (seq: number, content: string) => numbered(run, seq, content);
  await store.storeEvents(s.id, run, [event(1, "a"), event(2, "b")]);
  // The same batch again (a retry after its answer was lost): it is in the log already.
  await store.storeEvents(s.id, run, [event(1, "a"), event(2, "b")]);
  const aborted = (err: unknown) => err instanceof PlatformError && err.code === Code.Aborted;
  await assert.rejects(store.storeEvents(s.id, run, [event(2, "again")]), aborted, "a seq already in the log");
  await assert.rejects(store.storeEvents(s.id, run, [event(4, "skip")]), aborted, "a gap after the log's end");
  await assert.rejects(
    store.storeEvents(s.id, randomUUID(), [event(3, "other")]),
    aborted,
    "a run that does not hold the session",
  );
  await store.storeEvents(s.id, run, [event(3, "c"), { ...event(4, ""), type: "done", tokensOut: 7 }], {
    release: true,
  });
  const log = await store.listEvents(org, s.id);
  assert.deepEqual(
    log.map((e) => [e.seq, e.type, e.content, e.tokensOut, e.createdAt.toISOString(), e.runId]),
    [
      [1, "text", "a", 0, STORED_AT.toISOString(), run],
      [2, "text", "b", 0, STORED_AT.toISOString(), run],
      [3, "text", "c", 0, STORED_AT.toISOString(), run],
      [4, "done", "", 7, STORED_AT.toISOString(), run],
    ],
  );
  const released = await store.getSession(org, s.id);
  assert.equal(released?.status, "idle");
  assert.equal(released?.lastSeq, 4);
  await assert.rejects(store.storeEvents(s.id, run, [event(5, "late")]), aborted, "after its release");
});

test("on PostgreSQL a plain batch's store runs on the database's runner (Database.run), not through kysely", async () => {
  const { org, s, run } = await heldSession("runner");
  let throughKysely = 0;
  const counted = new KyselyStore(
    database.db.withPlugin({
      transformQuery: (args) => args.node,
      transformResult: async (args) => {
        throughKysely++;
        return args.result;
      },
    }),
    "origin-r",
    database.run,
  );
  const event = (seq: number, content: string) => numbered(run, seq, content);
  await counted.storeEvents(s.id, run, [event(1, "a")]);
  await counted.storeEvents(s.id, run, [event(2, "b"), event(3, "c")]);
  assert.equal(throughKysely, database.kind === "postgres" ? 0 : 2, "PostgreSQL: no store through kysely");
  const read = await store.readLog(org, s.id, 0, 10);
  assert.deepEqual(
    read?.events.map((e) => [e.seq, e.content]),
    [
      [1, "a"],
      [2, "b"],
      [3, "c"],
    ],
  );
  // Not the holder, or behind the log's end: refused as through kysely.
  await assert.rejects(counted.storeEvents(s.id, randomUUID(), [event(4, "other")]), aborted);
  await assert.rejects(counted.storeEvents(s.id, run, [event(3, "again")]), aborted);
});

test("a plain batch's store (each streamed text token's) builds no query: its statement is written out, and stores and notifies as the built one", async () => {
  const { org, s, run } = await heldSession("written-out");
  let built = 0;
  const counted = new KyselyStore(
    database.db.withPlugin({
      transformQuery: (args) => {
        built++;
        return args.node;
      },
      transformResult: async (args) => args.result,
    }),
    "origin-a",
  );
  const at = new Date("2026-01-02T03:04:05.678Z");
  const event = (seq: number, content: string) => ({
    seq,
    type: "text" as const,
    content,
    tokensIn: 1,
    tokensOut: 2,
    toolUseId: "",
    isError: false,
    createdAt: at,
    runId: run,
  });
  // On PostgreSQL, what another replica's listener hears (EVENTS_CHANNEL, `<origin>:<session>`).
  const url = database.url;
  const listener = url ? new pg.Client({ connectionString: url }) : undefined;
  const heard: string[] = [];
  if (listener) {
    await listener.connect();
    // This session's only: an earlier test's store may still end its notify window.
    listener.on("notification", (n) => n.payload?.endsWith(s.id) && heard.push(`${n.channel} ${n.payload}`));
    await listener.query(`listen ${EVENTS_CHANNEL}`);
  }
  await counted.storeEvents(s.id, run, [event(1, "a")]);
  await counted.storeEvents(s.id, run, [event(2, "b"), event(3, "c")]);
  if (listener) {
    for (let i = 0; i < 100 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    await listener.end();
    // The first store notified in its statement; the second, in its notify window, at the window's end.
    assert.deepEqual(heard, [`${EVENTS_CHANNEL} origin-a:${s.id}`, `${EVENTS_CHANNEL} origin-a:${s.id}`]);
  }
  assert.equal(built, 0, "no query built for a plain batch");
  await assert.rejects(
    counted.storeEvents(s.id, randomUUID(), [event(4, "other")]),
    (err: unknown) => err instanceof PlatformError && err.code === Code.Aborted,
  );
  // The release (the run's end) still goes through the built statement.
  await counted.storeEvents(s.id, run, [{ ...event(4, ""), type: "done" }], { release: true });
  assert.ok(built > 0);
  assert.deepEqual(
    (await store.listEvents(org, s.id)).map((e) => [
      e.seq,
      e.type,
      e.content,
      e.tokensIn,
      e.tokensOut,
      e.createdAt.toISOString(),
      e.runId,
    ]),
    [
      [1, "text", "a", 1, 2, STORED_AT.toISOString(), run],
      [2, "text", "b", 1, 2, STORED_AT.toISOString(), run],
      [3, "text", "c", 1, 2, STORED_AT.toISOString(), run],
      [4, "done", "", 1, 2, STORED_AT.toISOString(), run],
    ],
  );
  const session = await store.getSession(org, s.id);
  assert.equal(session?.lastSeq, 4);
  assert.equal(session?.status, "idle");
});

test("a fast stream notifies other replicas about once a notify window, and after its last token", async (t) => {
  if (!database.url) return t.skip("LISTEN/NOTIFY between connections: PostgreSQL");
  const { org, s, run } = await heldSession("paced");
  const paced = new KyselyStore(database.db, "origin-p", database.run);
  const listener = new pg.Client({ connectionString: database.url });
  await listener.connect();
  const heard: number[] = [];
  listener.on("notification", (n) => {
    if (n.payload === `origin-p:${s.id}`) heard.push(performance.now());
  });
  await listener.query(`listen ${EVENTS_CHANNEL}`);
  try {
    const started = performance.now();
    const tokens = 40;
    // When the last store began: its notification (in its statement, or from its window once it has
    // committed) is heard after that, possibly before its own caller hears of the commit.
    let lastStoreBegan = 0;
    for (let seq = 1; seq <= tokens; seq++) {
      if (seq === tokens) lastStoreBegan = performance.now();
      await paced.storeEvents(s.id, run, [numbered(run, seq, `t${seq}`)]);
      if (seq < tokens) await new Promise((r) => setTimeout(r, 2));
    }
    const lastStored = performance.now();
    for (let i = 0; i < 100 && (heard.at(-1) ?? 0) < lastStoreBegan; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok((heard.at(-1) ?? 0) >= lastStoreBegan, "a notification after the last token's store began");
    const windows = Math.ceil((lastStored - started) / NOTIFY_WINDOW_MS) + 1;
    assert.ok(
      heard.length <= windows + 1,
      `${heard.length} notifications for ${tokens} tokens over ${windows} windows`,
    );
    assert.ok(heard.length < tokens, "fewer notifications than tokens");
    assert.equal((await store.readLog(org, s.id, 0, 100))?.events.length, tokens, "every token stored");
  } finally {
    paced.stopNotifying();
    await listener.end();
  }
});

test("readLog: the session and its events after a cursor in one read, org-scoped", async () => {
  const org = randomUUID();
  const a = await agent(org, "readlog");
  const s = await store.createSession(org, a.id);
  const empty = await store.readLog(org, s.id, 0);
  assert.equal(empty?.session.id, s.id);
  assert.deepEqual(empty?.events, []);
  await store.appendEvents(s.id, undefined, [
    { type: "user", content: "one" },
    { type: "user", content: "two" },
    { type: "user", content: "three" },
  ]);
  const read = await store.readLog(org, s.id, 1);
  assert.equal(read?.session.lastSeq, 3);
  assert.deepEqual(read?.session, await store.getSession(org, s.id));
  assert.deepEqual(read?.events, (await store.listEvents(org, s.id)).slice(1));
  assert.deepEqual((await store.readLog(org, s.id, 3))?.events, []);
  assert.equal(await store.readLog(randomUUID(), s.id, 0), undefined, "another org's session");
  assert.equal(await store.readLog(org, randomUUID(), 0), undefined);
});

test("readLog: every page of a log with runs, no run and sub-millisecond times reads as listEvents and getSession do", async () => {
  const org = randomUUID();
  const a = await agent(org, "readlog-pages");
  const s = await store.createSession(org, a.id);
  const [r1, r2] = [randomUUID(), randomUUID()];
  // run_id is sent once per change of run (a page's first row always has it): runs, gaps without a run, a run again.
  const runs = [r1, r1, null, null, r2, r2, r2, r1, null, r1];
  // created_at is sent as epoch milliseconds, truncated as the timestamptz parser truncates: microseconds
  // past a millisecond, exactly on one, and before 1970 (where truncating the text is a floor).
  const times = [
    "2026-11-27 19:40:00.123999+00",
    "2026-11-27 19:40:00.124+00",
    "2026-11-27 19:40:00+00",
    "1969-12-31 23:59:59.9995+00",
    "1969-12-31 23:59:59.000001+00",
    "2026-11-27 21:40:00.000001+02",
    "2026-11-27 19:40:00.999999+00",
    "2000-01-01 00:00:00.0015+00",
    "2026-11-27 19:40:01.5+00",
    "2026-11-27 19:40:02.25-05:30",
  ];
  await database.db
    .insertInto("session_events")
    .values(
      runs.map((run_id, i) => ({
        session_id: s.id,
        seq: i + 1,
        run_id,
        type: i === 6 ? "done" : "text",
        content: `e${i + 1}`,
        tokens_in: i,
        tokens_out: 2 * i,
        tool_use_id: i === 3 ? "tu_1" : "",
        is_error: i === 3,
        created_at: times[i]!,
        ...(i === 4 ? { queued_seq: 2 } : {}),
      })),
    )
    .execute();
  await database.db
    .updateTable("sessions")
    .set({
      last_seq: runs.length,
      active_run_id: r1,
      run_lease_until: sql<Date>`${"2999-01-01 00:00:00.000999+00"}::timestamptz`,
      sandbox_id: "sbx",
      budgets: JSON.stringify({ maxTokens: 5 }),
      updated_at: "2026-11-27 19:40:03.456789+00",
    })
    .where("id", "=", s.id)
    .execute();
  const all = await store.listEvents(org, s.id);
  assert.deepEqual(
    all.map((e) => [e.createdAt.toISOString(), e.runId]),
    [
      ["2026-11-27T19:40:00.123Z", r1],
      ["2026-11-27T19:40:00.124Z", r1],
      ["2026-11-27T19:40:00.000Z", undefined],
      ["1969-12-31T23:59:59.999Z", undefined],
      ["1969-12-31T23:59:59.000Z", r2],
      ["2026-11-27T19:40:00.000Z", r2],
      ["2026-11-27T19:40:00.999Z", r2],
      ["2000-01-01T00:00:00.001Z", r1],
      ["2026-11-27T19:40:01.500Z", undefined],
      ["2026-11-28T01:10:02.250Z", r1],
    ],
  );
  const session = await store.getSession(org, s.id);
  assert.equal(session?.status, "running");
  assert.deepEqual(session?.budgets, { maxTokens: 5 });
  assert.equal(session?.updatedAt.toISOString(), "2026-11-27T19:40:03.456Z");
  for (const limit of [1, 2, 3, undefined]) {
    for (let after = 0; after <= runs.length; after++) {
      const read = await store.readLog(org, s.id, after, limit);
      assert.deepEqual(
        read?.events,
        all.slice(after, limit === undefined ? undefined : after + limit),
        `${after}+${limit}`,
      );
      assert.deepEqual(read?.session, session);
    }
  }
  // A lapsed lease reads as getSession reads it.
  await database.db
    .updateTable("sessions")
    .set({ run_lease_until: sql<Date>`${"2001-01-01 00:00:00+00"}::timestamptz` })
    .where("id", "=", s.id)
    .execute();
  const lapsed = await store.getSession(org, s.id);
  assert.equal(lapsed?.lapsedRunId, r1);
  assert.deepEqual((await store.readLog(org, s.id, 4, 2))?.session, lapsed);
});
