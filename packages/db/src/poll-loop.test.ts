import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { PollLoop } from "./poll-loop.ts";

/** Waits until `done()` holds; after 10 s (ample on a loaded machine for what waits here) the test fails. */
async function until(done: () => boolean, what = "the condition"): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) assert.fail(`gave up waiting for ${what}`);
    await delay(5);
  }
}

test("passes: one at start, then again after each ends, never two at once; a failure goes to onError and the next pass runs", async () => {
  let passes = 0;
  let running = 0;
  let most = 0;
  const errors: unknown[] = [];
  const loop = new PollLoop(
    async () => {
      passes++;
      running++;
      most = Math.max(most, running);
      await delay(2);
      running--;
      if (passes === 2) throw new Error("pass 2 failed");
    },
    () => 1,
    (err) => errors.push(err),
  );
  loop.start();
  loop.start();
  await until(() => passes >= 5);
  await loop.stop();
  assert.equal(most, 1, "passes overlapped");
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]), /pass 2 failed/);
  const after = passes;
  await delay(30);
  assert.equal(passes, after, "a pass ran after stop()");
});

test("wake() runs a pass now instead of at the next poll, never beside a running one nor on a stopped loop", async () => {
  let release!: () => void;
  let passes = 0;
  let finished = 0;
  const loop = new PollLoop(
    async () => {
      passes++;
      if (passes === 1) await new Promise<void>((r) => (release = r));
      finished++;
    },
    () => 3_600_000,
    () => {},
  );
  loop.start();
  await until(() => passes === 1);
  loop.wake();
  await delay(20);
  assert.equal(passes, 1, "wake() started a second pass while one ran");
  release();
  await until(() => finished === 1);
  loop.wake();
  await until(() => passes === 2);
  await loop.stop();
  loop.wake();
  await delay(20);
  assert.equal(passes, 2, "wake() ran a pass on a stopped loop");
});

test("stop() waits for the pass under way", async () => {
  let release!: () => void;
  let started = false;
  let finished = false;
  const loop = new PollLoop(
    async () => {
      started = true;
      await new Promise<void>((r) => (release = r));
      finished = true;
    },
    () => 3_600_000,
    () => {},
  );
  loop.start();
  await until(() => started);
  let stopped = false;
  const stopping = loop.stop().then(() => {
    stopped = true;
  });
  await delay(20);
  assert.equal(stopped, false, "stop() returned while a pass ran");
  release();
  await stopping;
  assert.ok(finished);
});
