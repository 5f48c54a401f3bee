import assert from "node:assert/strict";
import { test } from "node:test";
import { countAbortControllers } from "../testing/abort-count.ts";
import { adoptController, CallController, offerController } from "./adopt.ts";

test("an offered controller is adopted once, with its own signal only", () => {
  const c = new CallController();
  offerController(c);
  assert.equal(adoptController(new AbortController().signal), undefined);
  assert.equal(adoptController(undefined), undefined);
  assert.equal(adoptController(c.signal), c);
  assert.equal(adoptController(c.signal), undefined);
});

test("an offer adds no property to the signal (a slow store and read on an AbortSignal)", () => {
  const c = new CallController();
  const before = Reflect.ownKeys(c.signal);
  offerController(c);
  assert.deepEqual(Reflect.ownKeys(c.signal), before);
  assert.equal(adoptController(c.signal), c);
  assert.deepEqual(Reflect.ownKeys(c.signal), before);
});

test("a CallController makes no AbortSignal until one is asked for: its abort makes none", () => {
  const made = countAbortControllers();
  try {
    const c = new CallController();
    let hooked: unknown;
    c.onAbort = (reason) => {
      hooked = reason;
    };
    const reason = new Error("call ended");
    c.abort(reason);
    c.abort(new Error("second"));
    assert.equal(made.count, 0);
    assert.equal(c.signalMade, false);
    assert.equal(c.aborted, true);
    assert.equal(c.reason, reason);
    assert.equal(hooked, reason);
    // Asked for after the abort: aborted already, with the same reason.
    assert.equal(c.signal.aborted, true);
    assert.equal(c.signal.reason, reason);
    assert.equal(made.count, 1);
  } finally {
    made.restore();
  }
});

test("a signal asked for before the abort aborts as an AbortController's: its listeners run in abort(), then onAbort", () => {
  const c = new CallController();
  const order: string[] = [];
  c.signal.addEventListener("abort", () => order.push(`listener:${c.signal.aborted}`));
  c.onAbort = () => order.push("onAbort");
  assert.equal(c.signal.aborted, false);
  c.abort(new Error("gone"));
  assert.deepEqual(order, ["listener:true", "onAbort"]);
  assert.equal((c.signal.reason as Error).message, "gone");
  // No reason: an AbortError, as AbortController gives.
  const d = new CallController();
  d.abort();
  assert.equal((d.reason as DOMException).name, "AbortError");
  assert.equal(d.signal.reason, d.reason);
});
