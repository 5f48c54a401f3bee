// Issue 15 items 4 and 7 at the database layer: waits for a connection are
// bounded (refused at once beyond the bound, or after the acquire timeout),
// and a database that cannot be reached is UNAVAILABLE with a retry_after,
// while a failing statement stays what it was.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { sql } from "kysely";
import { type Database, openDatabase } from "./connect.ts";
import { isDatabaseUnavailable } from "./errors.ts";
import { createTestDatabase, testServerUrl } from "./testing.ts";

const opened: Database<unknown>[] = [];
after(() => Promise.all(opened.map((d) => d.close().catch(() => {}))));

/** A database of one connection with the given bounds, on the suite's backend. */
async function oneConnection(poolBounds: { maxWaiting?: number; acquireTimeoutMs?: number }) {
  const created = await createTestDatabase<unknown>();
  opened.push(created);
  if (!created.url) return created; // PGlite: one connection anyway; re-open with the bounds below.
  const d = await openDatabase<unknown>({ url: created.url, maxConnections: 1, minConnections: 0, poolBounds });
  opened.unshift(d);
  return d;
}

async function pgliteWith(poolBounds: { maxWaiting?: number; acquireTimeoutMs?: number }) {
  // From the cached cluster: openDatabase() without one runs PGlite's initdb (3 s of CPU, in each test).
  const d = await createTestDatabase<unknown>({ poolBounds });
  opened.push(d);
  return d;
}

const open = (bounds: { maxWaiting?: number; acquireTimeoutMs?: number }) =>
  testServerUrl() ? oneConnection(bounds) : pgliteWith(bounds);

/** Holds the only connection in a transaction until `release` resolves. */
function hold(d: Database<unknown>) {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const held = new Promise<void>((r) => (holding = r));
  const done = d.db.transaction().execute(async (trx) => {
    await sql`select 1`.execute(trx);
    holding();
    await released;
  });
  return {
    held,
    release: () => {
      release();
      return done;
    },
  };
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => e,
  );

test("callers beyond maxWaiting are refused at once with UNAVAILABLE + retry_after; those within it are served", async () => {
  const d = await open({ maxWaiting: 5, acquireTimeoutMs: 30_000 });
  const h = hold(d);
  await h.held;
  const waiting = Array.from({ length: 5 }, () => sql`select 1 as one`.execute(d.db));
  const started = performance.now();
  const refused = await failure(sql`select 1`.execute(d.db));
  const ms = performance.now() - started;
  assert.ok(refused instanceof PlatformError, String(refused));
  assert.equal(refused.code, Code.Unavailable);
  assert.equal(refused.extra.retry_after, "1");
  // At once: far below the 30 s acquire timeout it would otherwise wait (2 s allows a loaded machine's pauses).
  assert.ok(ms < 2000, `refused after ${ms.toFixed(0)} ms`);
  await h.release();
  for (const r of await Promise.all(waiting)) assert.deepEqual(r.rows, [{ one: 1 }]);
});

test("a caller without a connection after acquireTimeoutMs is refused with UNAVAILABLE, and the connection is not lost", async () => {
  const d = await open({ maxWaiting: 100, acquireTimeoutMs: 300 });
  const h = hold(d);
  await h.held;
  const started = performance.now();
  const refused = await failure(sql`select 1`.execute(d.db));
  const ms = performance.now() - started;
  assert.ok(refused instanceof PlatformError && refused.code === Code.Unavailable, String(refused));
  assert.ok(ms >= 250 && ms < 5000, `refused after ${ms.toFixed(0)} ms`);
  await h.release();
  // The timed-out caller's connection, when it came, went back to the pool.
  assert.deepEqual((await sql`select 2 as two`.execute(d.db)).rows, [{ two: 2 }]);
});

test("a failing statement is not mistaken for an outage", async () => {
  const d = await open({});
  const err = await failure(sql`select * from no_such_table`.execute(d.db));
  assert.ok(!(err instanceof PlatformError), String(err));
  assert.ok(!isDatabaseUnavailable(err));
});

test("a database at a closed port answers UNAVAILABLE with retry_after, promptly", {
  skip: !testServerUrl() && "PostgreSQL only: PGlite has no server to lose",
}, async () => {
  // A port that was free a moment ago: nothing listens on it.
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const d = await openDatabase<unknown>({ url: `postgres://postgres@127.0.0.1:${port}/postgres`, minConnections: 0 });
  opened.push(d);
  const started = performance.now();
  const err = await failure(sql`select 1`.execute(d.db));
  assert.ok(err instanceof PlatformError, String(err));
  assert.equal(err.code, Code.Unavailable);
  assert.equal(err.extra.retry_after, "5");
  assert.ok(performance.now() - started < 5000);
});

test("a connection the server ends mid-session (57P01) is UNAVAILABLE", {
  skip: !testServerUrl() && "PostgreSQL only",
}, async () => {
  const d = await open({});
  const err = await failure(
    d.db.transaction().execute(async (trx) => {
      await sql`select pg_terminate_backend(pg_backend_pid())`.execute(trx);
    }),
  );
  assert.ok(err instanceof PlatformError, String(err));
  assert.equal(err.code, Code.Unavailable);
  // The pool recovers with a new connection.
  assert.deepEqual((await sql`select 3 as three`.execute(d.db)).rows, [{ three: 3 }]);
});
