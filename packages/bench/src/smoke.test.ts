// test-timeout: 600000
import assert from "node:assert/strict";
import { test } from "node:test";
import { figures } from "./figures/index.ts";
import { runBench } from "./runner.ts";

// Every figure at toy size: the harness starts the real services, measures
// and produces numbers. Speed is never asserted (the machine is shared).
test("pnpm bench --quick produces a number for every figure", { timeout: 570_000 }, async () => {
  const results = await runBench({ size: "quick", log: () => {} });
  assert.equal(results.length, figures.length);
  for (const r of results) {
    assert.notEqual(r.met, undefined, `${r.figure} was not measured: ${r.notes}`);
    assert.match(r.measured, /\d/, `${r.figure} has no number`);
    assert.ok(r.raw, `${r.figure} has no raw numbers`);
  }
});
