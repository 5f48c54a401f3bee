import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import type { Session, SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import { Followers } from "./follow.ts";
import { EventHub } from "./hub.ts";

// What an idle follower costs: the database reads it makes while nothing
// happens. A store double counts them.

const ORG = "org";
const SESSION = "session";
const RUN = "run";

function event(seq: number, type: SessionEvent["type"] = "text"): SessionEvent {
  return {
    seq,
    type,
    content: `e${seq}`,
    tokensIn: 0,
    tokensOut: 0,
    toolUseId: "",
    isError: false,
    createdAt: new Date(0),
    runId: RUN,
  };
}

function storeDouble(log: SessionEvent[]) {
  const calls = { getSession: 0, readLog: 0 };
  let polled: (() => void) | undefined;
  const session = (): Session => {
    const done = log.some((e) => e.type === "done");
    const now = new Date();
    return {
      id: SESSION,
      orgId: ORG,
      agentId: "a",
      status: done ? "idle" : "running",
      activeRunId: done ? undefined : RUN,
      lastSeq: log.length,
      createdAt: now,
      updatedAt: now,
    };
  };
  const store = {
    async getSession(): Promise<Session> {
      calls.getSession++;
      polled?.();
      return session();
    },
    async readLog(_org: string, _session: string, after: number) {
      calls.readLog++;
      return { session: session(), events: log.filter((e) => e.seq > after) };
    },
  } as unknown as Store;
  /** Resolves after `n` more getSession calls. */
  const reads = (n: number) =>
    new Promise<void>((resolve) => {
      let left = n;
      polled = () => {
        if (--left === 0) resolve();
      };
    });
  return { store, calls, reads };
}

async function take(it: AsyncIterator<SessionEvent>, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await it.next()).value!.seq);
  return out;
}

test("followers of a run of this process read the log once, then only the hub: no polling", async () => {
  const log = [event(1, "user"), event(2)];
  const { store, calls } = storeDouble(log);
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  const followers = new Followers(store, hub, 1);
  const streams = Array.from({ length: 20 }, () => followers.follow(ORG, SESSION, 0)[Symbol.asyncIterator]());
  for (const s of streams) assert.deepEqual(await take(s, 2), [1, 2], "the stored events");
  const before = { ...calls };
  // Many poll intervals pass while the run is quiet.
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(calls, before, "an idle follower of a local run reads nothing");
  hub.publish(SESSION, [event(3), event(4, "done")]);
  for (const s of streams) {
    assert.deepEqual(await take(s, 2), [3, 4]);
    assert.equal((await s.next()).done, true);
  }
  assert.equal(hub.listenerCount(SESSION), 0);
  detach();
});

test("followers of a run on another replica share one poll per session and read the log only when it changed", async () => {
  const log = [event(1, "user"), event(2)];
  const { store, calls, reads } = storeDouble(log);
  const hub = new EventHub();
  const followers = new Followers(store, hub, 1);
  // The poll's timer does not hold the process open; the test must.
  const alive = setInterval(() => {}, 1000);
  const n = 20;
  const streams = Array.from({ length: n }, () => followers.follow(ORG, SESSION, 0)[Symbol.asyncIterator]());
  for (const s of streams) assert.deepEqual(await take(s, 2), [1, 2]);
  const polls = reads(5);
  const pending = streams.map((s) => s.next());
  await polls;
  assert.equal(calls.readLog, n, "only the followers' first reads: an unchanged poll wakes nobody");
  assert.ok(calls.getSession <= 6, `one poll per session, not per follower (${calls.getSession} reads)`);
  log.push(event(3), event(4, "done"));
  for (const p of pending) assert.equal((await p).value?.seq, 3);
  for (const s of streams) {
    assert.equal((await s.next()).value?.seq, 4);
    assert.equal((await s.next()).done, true);
  }
  clearInterval(alive);
});

test("a follower whose client went away ends without an event", async () => {
  const { store } = storeDouble([event(1, "user")]);
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  const abort = new AbortController();
  const it = new Followers(store, hub, 1)
    .follow(ORG, SESSION, 1, { signal: abort.signal, runId: RUN })
    [Symbol.asyncIterator]();
  const next = it.next();
  await new Promise((r) => setImmediate(r));
  abort.abort();
  assert.equal((await next).done, true);
  assert.equal(hub.listenerCount(SESSION), 0);
  detach();
});

/** A store double over `log` that records each read's `after` and limit (and, in `order`, when it was made). */
function pagedStore(log: SessionEvent[], order: string[] = []) {
  const reads: Array<{ after: number; limit: number }> = [];
  const store = {
    async readLog(_org: string, _session: string, after: number, limit: number) {
      reads.push({ after, limit });
      order.push(`read ${limit}`);
      const session = { id: SESSION, orgId: ORG, status: "idle", lastSeq: log.length } as unknown as Session;
      return { session, events: log.filter((e) => e.seq > after).slice(0, limit) };
    },
  } as unknown as Store;
  return { store, reads };
}

test("a replay reads a small first page, a small second one, then full pages, every event once in order", async () => {
  for (const n of [0, 15, 16, 17, 79, 80, 81, 330, 1000]) {
    const log = Array.from({ length: n }, (_, i) => event(i + 1));
    const { store, reads } = pagedStore(log);
    const seqs: number[] = [];
    for await (const e of new Followers(store, new EventHub(), 1).follow(ORG, SESSION, 0)) seqs.push(e.seq);
    assert.deepEqual(
      seqs,
      log.map((e) => e.seq),
      `all ${n} events, in order`,
    );
    const limits = reads.map((r) => r.limit);
    assert.ok(limits[0]! <= 16, `first read asks ${limits[0]} rows`);
    if (limits.length > 1) assert.ok(limits[1]! <= 64, `the second read asks ${limits[1]} rows`);
    assert.ok(
      limits.slice(2).every((l) => l >= 250),
      `the reads after the second are full pages: ${limits.join(",")}`,
    );
    // Each read continues after the last event of the ones before it (a keyset walk).
    let before = 0;
    for (const [i, r] of reads.entries()) {
      assert.equal(r.after, Math.min(n, before), `read ${i} of ${n} events: ${JSON.stringify(reads)}`);
      before += r.limit;
    }
  }
});

test("a replay resumed after an event past the first pages (Last-Event-ID) starts at the next event and misses none", async () => {
  const log = Array.from({ length: 700 }, (_, i) => event(i + 1));
  // Page boundaries of a replay from 0 (16, 80, 330, 580) and the events beside them.
  for (const after of [15, 16, 17, 79, 80, 81, 329, 330, 331, 580, 699, 700]) {
    const { store } = pagedStore(log);
    const seqs: number[] = [];
    for await (const e of new Followers(store, new EventHub(), 1).follow(ORG, SESSION, after)) seqs.push(e.seq);
    assert.deepEqual(
      seqs,
      Array.from({ length: 700 - after }, (_, i) => after + 1 + i),
      `after ${after}`,
    );
  }
});

test("a replay's first events go out before its second read: the read waits for a turn", async () => {
  const order: string[] = [];
  const { store } = pagedStore(
    Array.from({ length: 100 }, (_, i) => event(i + 1)),
    order,
  );
  const it = new Followers(store, new EventHub(), 1).follow(ORG, SESSION, 0);
  assert.equal((await it.next()).value?.seq, 1);
  while (it.nextReady()) {}
  // What a relay does at the end of a burst (SseRelay writes in a nextTick).
  const next = it.next();
  process.nextTick(() => order.push("written"));
  assert.equal((await next).value?.seq, 17);
  assert.deepEqual(order, ["read 16", "written", "read 64"]);
  await it.return();
});

test("a replay whose client left reads no more pages", async () => {
  const { store, reads } = pagedStore(Array.from({ length: 1000 }, (_, i) => event(i + 1)));
  const abort = new AbortController();
  const it = new Followers(store, new EventHub(), 1).follow(ORG, SESSION, 0, { signal: abort.signal });
  assert.equal((await it.next()).value?.seq, 1);
  abort.abort();
  const rest: number[] = [];
  for await (const e of it) rest.push(e.seq);
  assert.deepEqual(
    rest,
    Array.from({ length: 15 }, (_, i) => i + 2),
    "the rest of the page at hand, then the end",
  );
  assert.deepEqual(
    reads.map((r) => r.limit),
    [16],
    "no read after the abort",
  );
});

test("a follower that follows no queued send ends at a terminal event of no run, as at its run's end", async () => {
  const { store } = storeDouble([event(1, "user"), event(2)]);
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  const it = new Followers(store, hub, 1).follow(ORG, SESSION, 0)[Symbol.asyncIterator]();
  assert.deepEqual(await take(it, 2), [1, 2]);
  hub.publish(SESSION, [{ ...event(3, "error"), runId: undefined }]);
  assert.equal((await it.next()).value?.seq, 3);
  const end = await Promise.race([it.next(), new Promise((r) => setTimeout(() => r("still waiting"), 2000))]);
  assert.deepEqual(end, { done: true, value: undefined });
  detach();
});

test("the events of a page read are at hand at once (nextReady), every one once and in order, also with reads overlapping", async () => {
  const log = Array.from({ length: 40 }, (_, i) => event(i + 1));
  let reads = 0;
  const store = {
    async readLog(_org: string, _session: string, after: number, limit: number) {
      reads++;
      const session = { id: SESSION, orgId: ORG, status: "idle", lastSeq: log.length } as unknown as Session;
      return { session, events: log.filter((e) => e.seq > after).slice(0, limit) };
    },
  } as unknown as Store;
  const it = new Followers(store, new EventHub(), 1).follow(ORG, SESSION, 0);
  assert.equal(it.nextReady(), undefined, "nothing is at hand before the first read");
  assert.equal((await it.next()).value?.seq, 1);
  const ready: number[] = [];
  for (let e = it.nextReady(); e; e = it.nextReady()) ready.push(e.seq);
  assert.deepEqual(
    ready,
    Array.from({ length: 15 }, (_, i) => i + 2),
    "the rest of the first page (16 events)",
  );
  // Two reads at once: the second waits for the first's page, as a generator's would.
  const [a, b] = await Promise.all([it.next(), it.next()]);
  assert.deepEqual([a.value?.seq, b.value?.seq], [17, 18]);
  const rest: number[] = [];
  for await (const e of it) rest.push(e.seq);
  assert.deepEqual(
    rest,
    Array.from({ length: 22 }, (_, i) => i + 19),
  );
  assert.equal(reads, 2, "a page of 16, then one of the 24 left (fewer than asked: the end)");
  assert.deepEqual(await it.next(), { done: true, value: undefined });
});

test("a follow closed in the middle of a page lets its session go and ends", async () => {
  const { store } = storeDouble([event(1, "user"), event(2), event(3)]);
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  const it = new Followers(store, hub, 1).follow(ORG, SESSION, 0);
  assert.equal((await it.next()).value?.seq, 1);
  assert.equal(hub.listenerCount(SESSION), 1);
  assert.deepEqual(await it.return(), { done: true, value: undefined });
  assert.equal(hub.listenerCount(SESSION), 0, "unsubscribed");
  assert.equal(it.nextReady(), undefined, "the rest of the page is let go");
  assert.deepEqual(await it.next(), { done: true, value: undefined });
  detach();
});

test("a follower whose session is deleted ends, and leaves no hub listener, abort listener or poll behind", async () => {
  let deleted = false;
  let polls = 0;
  const log = [event(1, "user")];
  const session = (): Session => {
    const now = new Date();
    return {
      id: SESSION,
      orgId: ORG,
      agentId: "a",
      status: "running",
      activeRunId: RUN,
      lastSeq: 1,
      createdAt: now,
      updatedAt: now,
    };
  };
  const store = {
    async getSession() {
      polls++;
      return deleted ? undefined : session();
    },
    async readLog(_org: string, _session: string, after: number) {
      return deleted ? undefined : { session: session(), events: log.filter((e) => e.seq > after) };
    },
  } as unknown as Store;
  // No writer here: another replica runs the session, so the follower joins the session's poll.
  const hub = new EventHub();
  const abort = new AbortController();
  const it = new Followers(store, hub, 5).follow(ORG, SESSION, 0, { signal: abort.signal });
  assert.equal((await it.next()).value?.seq, 1);
  const next = it.next();
  while (polls === 0) await new Promise((r) => setTimeout(r, 5));
  assert.equal(hub.listenerCount(SESSION), 1);
  assert.equal(getEventListeners(abort.signal, "abort").length, 1);
  deleted = true;
  assert.deepEqual(await next, { done: true, value: undefined });
  assert.equal(hub.listenerCount(SESSION), 0, "left the hub");
  assert.equal(getEventListeners(abort.signal, "abort").length, 0, "no abort listener left");
  const seen = polls;
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(polls, seen, "the session's poll stopped");
});

test("a parked follower waits on its box alone: a published event wakes it, then its abort; it ends and leaves the hub", async () => {
  const log = [event(1, "user"), event(2)];
  const { store, calls } = storeDouble(log);
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  const abort = new AbortController();
  const it = new Followers(store, hub, 1_000).follow(ORG, SESSION, 0, { signal: abort.signal });
  assert.deepEqual(await take(it, 2), [1, 2]);
  let wakes = 0;
  const waiter = { wake: () => wakes++ };
  // Nothing at hand: the park reads on and finds the follower idle; the waiter waits on its box.
  assert.equal(it.park(waiter), true);
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  assert.equal(wakes, 0, "idle: not woken");
  assert.equal(it.nextReady(), undefined);
  log.push(event(3));
  hub.publish(SESSION, [event(3)]);
  assert.equal(wakes, 1, "the published event wakes the parked waiter at once");
  assert.deepEqual(await take(it, 1), [3]);
  assert.equal(calls.readLog, 1, "the event came from the hub, not a read of the log");
  assert.equal(it.park(waiter), true);
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
  abort.abort();
  assert.equal(wakes, 2, "the abort wakes it too");
  assert.equal((await it.next()).done, true);
  assert.equal(it.park(waiter), false, "an ended follow does not park");
  assert.equal(hub.listenerCount(SESSION), 0);
  detach();
});
