import assert from "node:assert/strict";
import { test } from "node:test";
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { compactingGc } from "./compact-gc.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const MiB = 1024 * 1024;

/** V8's old space: committed for objects, and the part of it that live objects use. */
function oldSpace(): { size: number; used: number } {
  const s = getHeapSpaceStatistics().find((x) => x.space_name === "old_space")!;
  return { size: s.space_size, used: s.space_used_size };
}

/** What a burst of opens leaves: objects kept interleaved, in the old space, with twice as many that got there and died. */
function sparseOldSpace(): object[] {
  const kept: object[] = [];
  let dying: object[][] = [[]];
  for (let i = 0; i < 1_500_000; i++) {
    const o = { i, list: [i, i + 1, i + 2] };
    if (i % 3 === 0) kept.push(o);
    else dying.at(-1)!.push(o);
    if (dying.at(-1)!.length === 100_000) dying.push([]);
  }
  dying = [];
  return kept;
}

test("a compacting GC evacuates the sparse old space that a plain GC leaves", () => {
  // Three rounds: now and then V8's own heuristics compact nearly as much with plain GCs (two did in one
  // of three tries), so it is the three together that tell a compacting GC from plain ones.
  for (let round = 0; round < 3; round++) {
    let kept: object[] | undefined = sparseOldSpace();
    gc();
    const plain = oldSpace();
    compactingGc(gc);
    const compacted = oldSpace();
    const detail = `round ${round}: after a plain GC ${(plain.size / MiB).toFixed(1)} MiB for ${(plain.used / MiB).toFixed(1)} live; after a compacting one ${(compacted.size / MiB).toFixed(1)} for ${(compacted.used / MiB).toFixed(1)}`;
    // A plain GC evacuates some of the sparse pages (20-42 MiB of them stayed).
    assert.ok(plain.size - plain.used > 12 * MiB, detail);
    // Every fragmented page evacuated: 1.2-1.5 MiB free was left; two plain GCs in its place left 8-71 MiB, or
    // (one try in three) under 4.
    assert.ok(compacted.size - compacted.used < 4 * MiB, detail);
    assert.ok(compacted.used > 0.9 * plain.used, detail);
    assert.equal(kept.length, 500_000);
    kept = undefined;
    gc();
  }
});
