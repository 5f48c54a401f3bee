import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import pino from "pino";
import type { SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import { EventHub } from "./hub.ts";
import { type LogFailure, RunLog } from "./run-log.ts";

// A run's log against a store double: nothing is published before it is
// stored, what is stored when, and what happens when storing fails.

const logger = pino({ level: "silent" });

/** A store whose storeEvents fails with the queued errors first, and can be held open. */
function storeDouble() {
  const stored: SessionEvent[] = [];
  const calls: Array<{ seqs: number[]; release: boolean }> = [];
  const errors: unknown[] = [];
  let hold: Promise<void> | undefined;
  let onStore: (() => void) | undefined;
  const store = {
    async storeEvents(
      _session: string,
      _run: string,
      events: readonly SessionEvent[],
      options: { release?: boolean } = {},
    ) {
      calls.push({ seqs: events.map((e) => e.seq), release: options.release === true });
      onStore?.();
      if (hold) await hold;
      const error = errors.shift();
      if (error) throw error;
      stored.push(...events);
    },
  } as unknown as Store;
  return {
    store,
    stored,
    calls,
    fail(...next: unknown[]) {
      errors.push(...next);
    },
    /** Holds every store call until the returned release is called. */
    hold(): () => void {
      let open!: () => void;
      hold = new Promise((resolve) => {
        open = () => {
          hold = undefined;
          resolve();
        };
      });
      return open;
    },
    /** Resolves at the `n`-th storeEvents call from now. */
    stores(n: number) {
      return new Promise<void>((resolve) => {
        let left = n;
        onStore = () => {
          if (--left === 0) resolve();
        };
      });
    },
  };
}

function listen(hub: EventHub) {
  const seen: SessionEvent[] = [];
  let changes = 0;
  hub.subscribe("s", { event: (e) => seen.push(e), changed: () => changes++ });
  return { seen, changes: () => changes };
}

const down = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const lost = () => new PlatformError(Code.Aborted, "aborted", "the run lost its hold on the session");

test("an event is published only once stored, numbered after the log's end; what arrives during a store goes in the next one; the terminal one frees the session", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 7, logger);
  const release = db.hold();
  const first = db.stores(1);
  log.publish([{ type: "text", content: "a" }]);
  await first;
  log.publish([{ type: "text", content: "b" }]);
  log.publish([{ type: "text", content: "c" }]);
  await new Promise((r) => setImmediate(r));
  assert.equal(follower.seen.length, 0, "nothing published while its store is out");
  assert.deepEqual(db.calls, [{ seqs: [8], release: false }]);
  release();
  await log.flush();
  assert.deepEqual(
    db.calls.map((c) => c.seqs),
    [[8], [9, 10]],
    "the two that queued meanwhile went together",
  );
  assert.deepEqual(
    follower.seen.map((e) => [e.seq, e.content, e.runId]),
    [
      [8, "a", "r"],
      [9, "b", "r"],
      [10, "c", "r"],
    ],
  );
  assert.equal(await log.finish([{ type: "done", tokensOut: 3 }]), true);
  assert.deepEqual(db.calls.at(-1), { seqs: [11], release: true });
  assert.deepEqual(
    db.stored.map((e) => [e.seq, e.type, e.content, e.createdAt]),
    follower.seen.map((e) => [e.seq, e.type, e.content, e.createdAt]),
    "published exactly as stored",
  );
  assert.equal(hub.hasWriter("s"), false);
});

test("while the database is down nothing is published and the store is retried; once it answers everything goes out with the seqs stored", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 0, logger, { retryMs: 1, maxRetryMs: 4 });
  db.fail(down(), down(), down());
  const tries = db.stores(3);
  log.publish([{ type: "tool_use", content: "{}", toolUseId: "t" }]);
  await tries;
  log.publish([{ type: "tool_result", content: "{}", toolUseId: "t" }]);
  assert.equal(follower.seen.length, 0, "not one event while the store fails");
  await log.flush();
  assert.deepEqual(
    follower.seen.map((e) => [e.seq, e.type]),
    [
      [1, "tool_use"],
      [2, "tool_result"],
    ],
  );
  assert.deepEqual(
    db.stored.map((e) => [e.seq, e.type]),
    follower.seen.map((e) => [e.seq, e.type]),
  );
  assert.equal(await log.finish([{ type: "done" }]), true);
  assert.deepEqual(
    db.stored.map((e) => e.seq),
    [1, 2, 3],
  );
});

test("a flush with patience gives up with unavailable while the database is down, and the events are still stored later", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 0, logger, { retryMs: 5, maxRetryMs: 5 });
  db.fail(...Array.from({ length: 8 }, down));
  log.publish([{ type: "user", content: "hi" }]);
  await assert.rejects(
    log.flush(undefined, 10),
    (err: unknown) => err instanceof PlatformError && err.code === Code.Unavailable,
  );
  assert.equal(await log.finish([{ type: "error", content: "the database did not answer" }]), true);
  assert.deepEqual(
    follower.seen.map((e) => [e.seq, e.type]),
    [
      [1, "user"],
      [2, "error"],
    ],
  );
});

test("a run that lost its session drops what it never published, tells the run to stop and its followers to read the log", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const failures: LogFailure[] = [];
  const log = new RunLog(db.store, hub, "s", "r", 4, logger, { onFailure: (f) => failures.push(f) });
  db.fail(lost());
  log.publish([{ type: "text", content: "never seen" }]);
  await assert.rejects(log.flush(), /lost its hold/);
  assert.deepEqual(
    failures.map((f) => f.kind),
    ["lost"],
  );
  assert.equal(follower.changes(), 1);
  log.publish([{ type: "text", content: "after" }]);
  assert.equal(await log.finish([{ type: "error", content: "x" }]), false, "its end is the takeover's");
  assert.equal(follower.seen.length, 0);
  assert.equal(db.calls.length, 1, "nothing more was tried");
  assert.equal(hub.hasWriter("s"), false);
});

test("an event the database rejects stops the run; the terminal event is then stored alone, right after the last stored seq", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const failures: LogFailure[] = [];
  const log = new RunLog(db.store, hub, "s", "r", 0, logger, { onFailure: (f) => failures.push(f) });
  log.publish([{ type: "text", content: "ok" }]);
  await log.flush();
  db.fail(Object.assign(new Error("value too long"), { code: "22001" }));
  log.publish([{ type: "text", content: "refused" }]);
  await assert.rejects(log.flush());
  assert.deepEqual(
    failures.map((f) => f.kind),
    ["rejected"],
  );
  assert.equal(await log.finish([{ type: "error", content: "the run's events could not be stored" }]), true);
  assert.deepEqual(
    follower.seen.map((e) => [e.seq, e.content]),
    [
      [1, "ok"],
      [2, "the run's events could not be stored"],
    ],
  );
});

test("abandoned during an outage (shutdown): finish gives up at once, nothing published; NUL characters are stored as U+FFFD", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 0, logger, { retryMs: 60_000 });
  db.fail(down());
  const tried = db.stores(1);
  const finished = log.finish([{ type: "error", content: "shutting down" }]);
  await tried;
  log.abandon();
  assert.equal(await finished, false);
  assert.equal(follower.seen.length, 0);

  const clean = new RunLog(db.store, hub, "s", "r2", 0, logger);
  clean.publish([{ type: "text", content: "a\u0000b" }]);
  await clean.flush();
  assert.equal(follower.seen[0]?.content, "a\uFFFDb");
});
