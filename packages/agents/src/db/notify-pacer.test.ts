import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { NotifyPacer } from "./notify-pacer.ts";

test("a session's stores notify in their statement after a quiet spell, else once when the window ends", async () => {
  const sent: string[] = [];
  const pacer = new NotifyPacer(async (id) => sent.push(id), 40);
  try {
    assert.equal(pacer.claim("a"), true, "the first store notifies itself");
    assert.equal(pacer.claim("a"), false, "the next within the window leaves it to the window's end");
    assert.equal(pacer.claim("a"), false);
    assert.equal(pacer.claim("b"), true, "each session has a window of its own");
    assert.deepEqual(sent, []);
    await sleep(70);
    assert.deepEqual(sent, ["a"], "one notification for the stores the window held back; none for b, which had none");
    // The stream went on: the window reopened with that notification.
    assert.equal(pacer.claim("a"), false);
    await sleep(70);
    assert.deepEqual(sent, ["a", "a"]);
    // Quiet since: the window closed without a notification, and the next store notifies itself again.
    await sleep(70);
    assert.deepEqual(sent, ["a", "a"]);
    assert.equal(pacer.claim("a"), true);
    assert.equal(pacer.claim("b"), true);
  } finally {
    pacer.stop();
  }
});

test("a stopped pacer sends nothing more, and a failed notification is not the store's failure", async () => {
  let calls = 0;
  const pacer = new NotifyPacer(async () => {
    calls++;
    throw new Error("database gone");
  }, 20);
  pacer.claim("a");
  pacer.claim("a");
  await sleep(50);
  assert.equal(calls, 1, "the window's notification was tried; its rejection is dropped, not unhandled");
  pacer.claim("c");
  pacer.claim("c");
  pacer.stop();
  await sleep(50);
  assert.equal(calls, 1, "nothing after stop");
});
