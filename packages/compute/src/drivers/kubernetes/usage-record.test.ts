import assert from "node:assert/strict";
import { test } from "node:test";
import { parseUsageRecord, UsageRecordFilter } from "./usage-record.ts";

const record = (id: string, fields: string) => Buffer.from(`\0PLATFORM_EXEC_USAGE_${id} ${fields}\0`);

test("the record is parsed and stripped, however the chunks split it; other stderr passes unchanged", () => {
  const whole = Buffer.concat([
    Buffer.from("err line\n"),
    record("abc", "2048 3 4 0m1.250000s 0m0.250000s"),
    Buffer.from("late\n"),
  ]);
  for (let cut = 0; cut <= whole.length; cut++) {
    const f = new UsageRecordFilter("abc");
    const out = Buffer.concat([f.push(whole.subarray(0, cut)), f.push(whole.subarray(cut)), f.flush()]);
    assert.equal(out.toString(), "err line\nlate\n", `cut at ${cut}`);
    assert.equal(f.record?.cpuMs, 1500);
    assert.equal(f.record?.memoryPeakBytes, 2048 * 1024);
    assert.equal(f.record?.oomKills, 1);
  }
});

test("text is not held back unless it may start the record; another exec's record and stray NULs pass through", () => {
  const f = new UsageRecordFilter("abc");
  assert.equal(f.push(Buffer.from("progress 10%")).toString(), "progress 10%");
  assert.equal(f.push(Buffer.from("a\0b")).toString(), "a\0b");
  const other = record("zzz", "1 0 0 0m0s 0m0s");
  assert.deepEqual(Buffer.concat([f.push(other), f.flush()]), other);
  assert.equal(f.record, undefined);
  // A NUL at the very end is held until the next bytes show it is not the record.
  assert.equal(f.push(Buffer.from("x\0")).toString(), "x");
  assert.equal(f.push(Buffer.from("y")).toString(), "\0y");
});

test("parseUsageRecord: dash and bash `times` formats; missing cgroup counters mean no OOM", () => {
  assert.equal(parseUsageRecord("0 0 0 0m0.02s 0m0.01s").cpuMs, 30);
  assert.equal(parseUsageRecord("10 0 0 0m0.000000s 0m0.000000s").oomKills, 0);
  assert.equal(parseUsageRecord("10   ").cpuMs, 0);
});
