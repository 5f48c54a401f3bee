import assert from "node:assert/strict";
import { test } from "node:test";
import { NotifyPacer } from "./notify-pacer.ts";

// The windows run on node:test's mocked setTimeout: time moves only when a
// test ticks it, so a loaded machine cannot reorder a window's end and a store.
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

test("a session's stores notify in their statement after a quiet spell, else once when the window ends", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const sent: string[] = [];
  const pacer = new NotifyPacer(async (id) => sent.push(id), 40);
  try {
    assert.equal(pacer.claim("a"), true, "the first store notifies itself");
    assert.equal(pacer.claim("a"), false, "the next within the window leaves it to the window's end");
    pacer.stored("a");
    assert.equal(pacer.claim("a"), false);
    pacer.stored("a");
    assert.equal(pacer.claim("b"), true, "each session has a window of its own");
    t.mock.timers.tick(39);
    assert.deepEqual(sent, []);
    t.mock.timers.tick(1);
    assert.deepEqual(sent, ["a"], "one notification for the stores the window held back; none for b, which had none");
    // The stream went on: the window reopened with that notification.
    assert.equal(pacer.claim("a"), false);
    pacer.stored("a");
    t.mock.timers.tick(40);
    assert.deepEqual(sent, ["a", "a"]);
    // Quiet since: the window closed without a notification, and the next store notifies itself again.
    t.mock.timers.tick(40);
    assert.deepEqual(sent, ["a", "a"]);
    assert.equal(pacer.claim("a"), true);
    assert.equal(pacer.claim("b"), true);
  } finally {
    pacer.stop();
  }
});

test("a store still in flight when its window ends is announced once it has committed, not before", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const sent: string[] = [];
  const pacer = new NotifyPacer(async (id) => sent.push(id), 25);
  try {
    assert.equal(pacer.claim("a"), true);
    assert.equal(pacer.claim("a"), false, "a second store within the window: quiet");
    t.mock.timers.tick(30);
    assert.deepEqual(sent, [], "the window ended while that store was in flight: nothing announced yet");
    pacer.stored("a");
    assert.deepEqual(sent, ["a"], "committed after its window: announced at once");
    // A window opened behind that notification, so the stream stays paced.
    assert.equal(pacer.claim("a"), false);
    pacer.stored("a");
    t.mock.timers.tick(25);
    assert.deepEqual(sent, ["a", "a"]);
    // Committed within the window that was open when it claimed: the window's end announces it.
    assert.equal(pacer.claim("a"), false);
    t.mock.timers.tick(10);
    pacer.stored("a");
    assert.deepEqual(sent, ["a", "a"]);
    t.mock.timers.tick(15);
    assert.deepEqual(sent, ["a", "a", "a"]);
  } finally {
    pacer.stop();
  }
});

test("a stopped pacer sends nothing more, and a failed notification is not the store's failure", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  let calls = 0;
  const pacer = new NotifyPacer(async () => {
    calls++;
    throw new Error("database gone");
  }, 20);
  pacer.claim("a");
  pacer.claim("a");
  pacer.stored("a");
  t.mock.timers.tick(20);
  await flush();
  assert.equal(calls, 1, "the window's notification was tried; its rejection is dropped, not unhandled");
  pacer.claim("c");
  pacer.claim("c");
  pacer.stop();
  pacer.stored("c");
  t.mock.timers.tick(100);
  await flush();
  assert.equal(calls, 1, "nothing after stop");
});
