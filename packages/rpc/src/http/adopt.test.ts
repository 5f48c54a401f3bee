import assert from "node:assert/strict";
import { test } from "node:test";
import { adoptController, offerController } from "./adopt.ts";

test("an offered controller is adopted once, with its own signal only", () => {
  const c = new AbortController();
  offerController(c);
  assert.equal(adoptController(new AbortController().signal), undefined);
  assert.equal(adoptController(undefined), undefined);
  assert.equal(adoptController(c.signal), c);
  assert.equal(adoptController(c.signal), undefined);
});

test("an offer adds no property to the signal (a slow store and read on an AbortSignal)", () => {
  const c = new AbortController();
  const before = Reflect.ownKeys(c.signal);
  offerController(c);
  assert.deepEqual(Reflect.ownKeys(c.signal), before);
  assert.equal(adoptController(c.signal), c);
  assert.deepEqual(Reflect.ownKeys(c.signal), before);
});
