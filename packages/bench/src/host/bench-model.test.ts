import assert from "node:assert/strict";
import { test } from "node:test";
import { BenchModel, stampsOf } from "./bench-model.ts";

test("the paced model waits on timers, not on a busy loop that would take a core from the process under test", async () => {
  const model = new BenchModel();
  const open = (name: string) =>
    model.start({ model: name, system: "", messages: [], tools: [], maxTokens: 1 }, new AbortController().signal);
  // Warmed first: the first stream's compiling (and a test runner's own start) would count as pacing's CPU
  // on a loaded machine (21 % of a core in one CI run at load 7).
  for await (const _ of await open("paced-5-3000"));
  const stream = await open("paced-40-3000");
  const wall0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  let tokens = 0;
  for await (const ev of stream) if (ev.type === "text") tokens += stampsOf(ev.text).length;
  const cpu = process.cpuUsage(cpu0);
  const wallUs = Number(process.hrtime.bigint() - wall0) / 1000;
  assert.equal(tokens, 40);
  assert.ok(wallUs >= 40 * 3000, `40 tokens 3 ms apart took ${wallUs} µs`);
  // A spin over the last millisecond of each wait used a third of the wall time.
  const share = (cpu.user + cpu.system) / wallUs;
  assert.ok(share < 0.15, `the model used ${(share * 100).toFixed(0)} % of a core while pacing`);
});
