import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as http from "node:http";
import { after, before, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { IdentityDouble } from "@platform/identity-client/testing";
import { CompiledQuery, type KyselyPlugin, type RootOperationNode, sql } from "kysely";
import pino from "pino";
import { KyselyStore } from "../db/kysely-store.ts";
import { encodePageToken } from "../domain/log-pages.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

// Issue 26: the cost of reading a session's log must not grow with the log.
// GetSession answers a page of it (the first 1,000 events by default, a
// next_page_token for the rest), read with a keyset query; the SSE replay of a
// stored log streams it a page at a time with backpressure, so neither a long
// log nor a slow client makes the process hold the log.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const PAGED = 2_500;
const REPLAYED = 20_000;
/** The content of each replayed event: 20,000 of them are ~20 MB of log. */
const BODY = "a fragment of a long streamed reply, padded to a kilobyte ".repeat(18).slice(0, 1000);
/**
 * The most the process's live heap may grow while it replays the 20 MB log
 * to a client that stops reading (measured: about 5 MiB; holding the log,
 * writing it without waiting for the socket, or holding each streamed
 * message until the stream ends, as the in-process transport did, 50 MiB).
 */
const HEAP_BOUND = 12 * 1024 * 1024;

let service: AgentsServer;
let base: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
let token: string;
let agentId: string;

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig({ identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() });
  service = await createAgentsServer(config, pino({ level: "silent" }), { database, internalTls: undefined });
  ({ url: base } = await service.listen());
  token = identity.caller().token;
  const agent = await json<{ id: string }>("POST", "/v1/agents", { name: "pages", slug: "pages", model: "dev/echo" });
  agentId = agent.id;
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

function call(method: string, path: string, body?: unknown) {
  return fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await call(method, path, body);
  const text = await res.text();
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

async function newSession(): Promise<string> {
  return (await json<{ id: string }>("POST", "/v1/sessions", { agentId })).id;
}

/** Writes events `from`..`to` of a session straight into its log (a long conversation in one statement). */
async function seed(sessionId: string, from: number, to: number, content = "a fragment of a long streamed reply") {
  await sql`insert into session_events (session_id, seq, type, content)
    select ${sessionId}::uuid, g, case when g % 50 = 1 then 'user' else 'text' end, ${content}
    from generate_series(${from}::int, ${to}::int) g`.execute(database.db);
  await sql`update sessions set last_seq = ${to} where id = ${sessionId}::uuid`.execute(database.db);
}

type Page = { session: { id: string }; events: Array<{ seq: string }>; nextPageToken?: string | null };

test("a short session's first page is its whole log, in the response shape it had before paging", async () => {
  const sessionId = await newSession();
  const sent = await call("POST", `/v1/sessions/${sessionId}/messages`, {
    messages: [{ role: "user", content: "hello there" }],
  });
  assert.equal(sent.status, 200);
  await sent.text();
  const res = await call("GET", `/v1/sessions/${sessionId}`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as Page & Record<string, unknown>;
  // The keys GetSession answered with before paging, and the new one, null on a last page (as
  // ListAgents' `next`: the agents REST surface writes unset optional fields as null).
  assert.deepEqual(Object.keys(body).sort(), [
    "effectiveBudgets",
    "events",
    "nextPageToken",
    "pendingToolCalls",
    "queuedSends",
    "session",
    "usage",
  ]);
  assert.equal(body.nextPageToken, null);
  const seqs = body.events.map((e) => Number(e.seq));
  assert.ok(seqs.length >= 3, `user message, text, done: ${seqs}`);
  assert.deepEqual(
    seqs,
    seqs.map((_, i) => i + 1),
  );
  assert.equal(body.events.at(-1) && (body.events.at(-1) as { type?: string }).type, "done");
});

test(`GetSession pages walk a ${PAGED}-event log whole: no gap, no repeat, a token only while more remain`, async () => {
  const sessionId = await newSession();
  await seed(sessionId, 1, PAGED);
  const walk = async (query: string, onPage?: (n: number) => Promise<void>) => {
    const seqs: number[] = [];
    const sizes: number[] = [];
    let next: string | null | undefined;
    do {
      const params = new URLSearchParams(query);
      if (next) params.set("pageToken", next);
      const page = await json<Page>("GET", `/v1/sessions/${sessionId}?${params}`);
      assert.equal(page.session.id, sessionId);
      seqs.push(...page.events.map((e) => Number(e.seq)));
      sizes.push(page.events.length);
      next = page.nextPageToken;
      await onPage?.(sizes.length);
    } while (next);
    return { seqs, sizes };
  };
  const whole = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  // The default page: 1,000 events.
  const byDefault = await walk("");
  assert.deepEqual(byDefault.sizes, [1000, 1000, 500]);
  assert.deepEqual(byDefault.seqs, whole(PAGED));
  // A page size of its own (also as page_size); more than 1,000 is lowered to 1,000.
  assert.deepEqual((await walk("pageSize=700")).sizes, [700, 700, 700, 400]);
  assert.deepEqual((await walk("page_size=1250")).sizes, [1000, 1000, 500]);
  assert.deepEqual((await walk("pageSize=2500")).sizes, [1000, 1000, 500]);
  // A log exactly a page long: no token (nothing more), not an empty second page.
  assert.deepEqual((await walk("pageSize=500")).sizes, [500, 500, 500, 500, 500]);

  // Events appended while a client pages come on its later pages.
  let grown = false;
  const growing = await walk("pageSize=1000", async (n) => {
    if (n === 1 && !grown) {
      grown = true;
      await seed(sessionId, PAGED + 1, PAGED + 10);
    }
  });
  assert.deepEqual(growing.seqs, whole(PAGED + 10));
});

test("a page token that is not one of this session's is invalid_argument (400), never a 500", async () => {
  const sessionId = await newSession();
  const other = await newSession();
  await seed(sessionId, 1, 30);
  const first = await json<Page>("GET", `/v1/sessions/${sessionId}?pageSize=10`);
  assert.ok(first.nextPageToken);
  const b64 = (s: string) => Buffer.from(s).toString("base64url");
  const bad = [
    "not-a-token",
    "%00",
    b64("a1:10"),
    b64(`l1:${sessionId}:`),
    b64(`l1:${sessionId}:-1`),
    b64(`l1:${sessionId}:0`),
    b64(`l1:${sessionId}:zzzzzzzzzzz`),
    b64(`l1:${sessionId}:1.5`),
    b64(`l1:${sessionId}:10 `),
    "x".repeat(5000),
  ];
  for (const t of bad) {
    const res = await call("GET", `/v1/sessions/${sessionId}?pageToken=${encodeURIComponent(t)}`);
    const body = await res.text();
    assert.equal(res.status, 400, `${t.slice(0, 40)}: ${res.status} ${body}`);
    assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, "invalid_argument");
  }
  // Another session's token, valid there.
  const foreign = await call("GET", `/v1/sessions/${other}?pageToken=${first.nextPageToken}`);
  assert.equal(foreign.status, 400, await foreign.text());
  // Page sizes that are not numbers are the transcoder's 400.
  for (const size of ["-1", "abc", "4294967296"]) {
    const res = await call("GET", `/v1/sessions/${sessionId}?pageSize=${size}`);
    assert.equal(res.status, 400, `pageSize=${size}: ${res.status} ${await res.text()}`);
  }
  // A token past the log's end (the log was deleted up to there) is a valid, empty last page.
  const past = await json<Page>("GET", `/v1/sessions/${sessionId}?pageToken=${encodePageToken(sessionId, 99)}`);
  assert.deepEqual(past.events, []);
  assert.equal(past.nextPageToken, null);
  // A missing session is still 404, a token of it or not.
  const missing = randomUUID();
  const gone = await call("GET", `/v1/sessions/${missing}?pageToken=${encodePageToken(missing, 5)}`);
  assert.equal(gone.status, 404, await gone.text());
});

test("a page deep in a long log reads only that page's rows (keyset by the (session_id, seq) key)", async () => {
  const sessionId = await newSession();
  await seed(sessionId, 1, REPLAYED);
  await sql`analyze session_events`.execute(database.db);
  const orgId = (
    await sql<{ org_id: string }>`select org_id from sessions where id = ${sessionId}::uuid`.execute(database.db)
  ).rows[0]!.org_id;
  // The statement the store runs, captured, then explained with its parameters.
  let captured: CompiledQuery | undefined;
  const capture: KyselyPlugin = {
    transformQuery(args) {
      captured = database.db.getExecutor().compileQuery(args.node as RootOperationNode, args.queryId);
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  const store = new KyselyStore(database.db.withPlugin(capture));
  for (const after of [0, REPLAYED / 2]) {
    const read = await store.readLog(orgId, sessionId, after, 1001);
    assert.equal(read?.events.length, 1001);
    assert.equal(read?.events[0]?.seq, after + 1);
    const plan = await database.db.executeQuery<{ "QUERY PLAN": unknown }>(
      CompiledQuery.raw(`explain (analyze, format json) ${captured!.sql}`, [...captured!.parameters]),
    );
    const raw = plan.rows[0]!["QUERY PLAN"];
    const tree = (typeof raw === "string" ? JSON.parse(raw) : raw) as Array<{ Plan: PlanNode }>;
    const rows = rowsReadFrom(tree[0]!.Plan, "session_events");
    // A page and the one that tells whether more follow; a scan of the log would be 10,000-20,000.
    assert.ok(rows <= 1001, `after ${after}: ${rows} rows of session_events read for a page of 1,001`);
  }
});

type PlanNode = { "Node Type": string; "Relation Name"?: string; "Actual Rows": number; Plans?: PlanNode[] };

/** Rows the plan's scans of `table` produced (before any later limit), over all loops. */
function rowsReadFrom(node: PlanNode, table: string): number {
  const own =
    node["Relation Name"] === table
      ? node["Actual Rows"] * ((node as unknown as { "Actual Loops"?: number })["Actual Loops"] ?? 1)
      : 0;
  return own + (node.Plans ?? []).reduce((sum, p) => sum + rowsReadFrom(p, table), 0);
}

test(`an SSE replay of ${REPLAYED} events (20 MB) to a client that stops reading holds a bounded heap and delivers every event in order`, {
  timeout: 240_000,
}, async () => {
  const sessionId = await newSession();
  await seed(sessionId, 1, REPLAYED, BODY);
  gc();
  const baseline = process.memoryUsage().heapUsed;
  let peak = 0;
  const sample = () => {
    gc();
    peak = Math.max(peak, process.memoryUsage().heapUsed - baseline);
  };
  const url = new URL(`${base}/v1/sessions/${sessionId}/events?after=0`);
  let expected = 1;
  let disorder = "";
  let received = 0;
  let bytes = 0;
  await new Promise<void>((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      // Bytes, and a copied tail: slices of strings would keep every chunk alive.
      let tail = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        bytes += chunk.length;
        // Only the ids are kept: the client must not be what holds the log.
        const buf = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
        const cut = buf.lastIndexOf(10);
        tail = Buffer.from(buf.subarray(cut + 1));
        for (const m of buf.toString("latin1", 0, cut + 1).matchAll(/^id: (\d+)$/gm)) {
          const id = Number(m[1]);
          if (id !== expected && !disorder) disorder = `id ${id} where ${expected} was due`;
          expected = id + 1;
          received++;
        }
      };
      // The client stops reading after the first chunk for 1.5 s: without
      // backpressure the server would frame the whole log into its buffers
      // now. The live heap is measured (after a full GC) at the end of it.
      let during: NodeJS.Timeout | undefined;
      res.once("data", (chunk: Buffer) => {
        onData(chunk);
        res.pause();
        setTimeout(() => {
          sample();
          res.on("data", onData);
          res.resume();
          // Then it reads everything at full speed, the live heap measured
          // every second (a full GC takes ~200 ms of this thread here).
          during = setInterval(sample, 1000);
        }, 1500);
      });
      res.on("end", () => {
        clearInterval(during);
        resolve();
      });
      res.on("error", reject);
    });
    req.on("error", reject);
  });
  assert.equal(disorder, "");
  assert.equal(received, REPLAYED, `${received} events of ${REPLAYED} (${bytes} bytes)`);
  assert.ok(bytes > 20_000_000, `${bytes} bytes`);
  assert.ok(
    peak < HEAP_BOUND,
    `the heap grew by ${(peak / 2 ** 20).toFixed(1)} MiB during the replay (bound ${HEAP_BOUND / 2 ** 20} MiB)`,
  );
  console.log(`replay of ${REPLAYED} events: live heap peak +${(peak / 2 ** 20).toFixed(1)} MiB`);
});
