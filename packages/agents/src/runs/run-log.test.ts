import assert from "node:assert/strict";
import { test } from "node:test";
import { PlatformError } from "@platform/errors";
import pino from "pino";
import type { SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import { EventHub } from "./hub.ts";
import { RunLog } from "./run-log.ts";

// A run's log against a store double: what is published when, what is
// stored when, and what happens when storing fails.

const logger = pino({ level: "silent" });

function storeDouble() {
  const stored: SessionEvent[] = [];
  const calls: Array<{ seqs: number[]; release: boolean }> = [];
  let failures = 0;
  let onStore: (() => void) | undefined;
  const store = {
    async storeEvents(_session: string, _run: string, events: readonly SessionEvent[], options: { release?: boolean } = {}) {
      calls.push({ seqs: events.map((e) => e.seq), release: options.release === true });
      onStore?.();
      if (failures > 0) {
        failures--;
        throw PlatformError.unavailable("the database did not answer");
      }
      stored.push(...events);
    },
  } as unknown as Store;
  return {
    store,
    stored,
    calls,
    failNext(n: number) {
      failures = n;
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

test("events are numbered after the log's end and published at once; stored in one batch on flush; the terminal event is published only once stored", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 7, 60_000, logger);
  const published = log.publish([{ type: "text", content: "a" }, { type: "text", content: "b" }]);
  assert.deepEqual(
    published.map((e) => [e.seq, e.runId]),
    [
      [8, "r"],
      [9, "r"],
    ],
  );
  assert.deepEqual(
    follower.seen.map((e) => e.seq),
    [8, 9],
    "published before anything is stored",
  );
  assert.equal(db.calls.length, 0);
  assert.deepEqual(
    hub.subscribe("s", { event: () => {}, changed: () => {} }).unstored.map((e) => e.seq),
    [8, 9],
    "a late follower gets the unstored tail",
  );
  await log.flush();
  assert.deepEqual(db.calls, [{ seqs: [8, 9], release: false }]);
  log.publish([{ type: "text", content: "c" }]);
  const finishing = log.finish([{ type: "done", tokensOut: 3 }]);
  assert.deepEqual(
    follower.seen.map((e) => e.seq),
    [8, 9, 10],
    "the terminal event waits for the store",
  );
  await finishing;
  assert.deepEqual(db.calls.at(-1), { seqs: [10, 11], release: true });
  assert.deepEqual(
    follower.seen.map((e) => [e.seq, e.type]),
    [
      [8, "text"],
      [9, "text"],
      [10, "text"],
      [11, "done"],
    ],
  );
  assert.deepEqual(
    db.stored.map((e) => [e.seq, e.content, e.createdAt]),
    follower.seen.map((e) => [e.seq, e.content, e.createdAt]),
    "stored as published",
  );
  assert.equal(hub.hasWriter("s"), false);
});

test("the timer stores a batch; a failed batch stays queued and is stored with the next try", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const log = new RunLog(db.store, hub, "s", "r", 0, 1, logger);
  db.failNext(1);
  const twoTries = db.stores(2);
  log.publish([{ type: "text", content: "a" }]);
  await twoTries;
  await log.flush();
  assert.deepEqual(
    db.calls.map((c) => c.seqs),
    [[1], [1]],
  );
  assert.deepEqual(
    db.stored.map((e) => e.seq),
    [1],
  );
  await log.finish([{ type: "done" }]);
  assert.deepEqual(
    db.stored.map((e) => e.seq),
    [1, 2],
  );
});

test("when the terminal store fails, followers are told to read the log and the writer is gone", async () => {
  const db = storeDouble();
  const hub = new EventHub();
  const follower = listen(hub);
  const log = new RunLog(db.store, hub, "s", "r", 0, 60_000, logger);
  log.publish([{ type: "text", content: "a" }]);
  db.failNext(1);
  await assert.rejects(log.finish([{ type: "error", content: "x" }]), /did not answer/);
  assert.equal(follower.changes(), 1);
  assert.deepEqual(
    follower.seen.map((e) => e.type),
    ["text"],
    "no terminal event that is not stored",
  );
  assert.equal(hub.hasWriter("s"), false);
});
