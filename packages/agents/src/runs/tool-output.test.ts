import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { ToolOutput } from "./tool-output.ts";

type Content = { stdout?: string; stderr?: string; droppedBytes?: number; truncated?: boolean };

function recorder(limits = { intervalMs: 100, eventBytes: 1000, callBytes: 5000 }) {
  const events: Array<{ at: number; content: Content }> = [];
  const output = new ToolOutput((c) => events.push({ at: Date.now(), content: JSON.parse(c) as Content }), limits);
  return { events, output };
}

test("chunks of one interval are joined into one event; events are at least the interval apart", async () => {
  const { events, output } = recorder();
  const started = Date.now();
  for (let i = 0; i < 30; i++) {
    output.add(i % 2 ? "stderr" : "stdout", Buffer.from(`${i}\n`));
    await sleep(10);
  }
  output.end();
  const elapsed = Date.now() - started;
  // One event per 100 ms at most, plus the last one at the end: not one per chunk.
  assert.ok(
    events.length >= 2 && events.length <= Math.floor(elapsed / 100) + 2,
    `${events.length} events for ${elapsed} ms of output`,
  );
  for (let i = 1; i < events.length - 1; i++) assert.ok(events[i]!.at - events[i - 1]!.at >= 95, "rate-limited");
  const stdout = events.map((e) => e.content.stdout ?? "").join("");
  const stderr = events.map((e) => e.content.stderr ?? "").join("");
  assert.equal(stdout, Array.from({ length: 15 }, (_, i) => `${i * 2}\n`).join(""));
  assert.equal(stderr, Array.from({ length: 15 }, (_, i) => `${i * 2 + 1}\n`).join(""));
  assert.ok(events.every((e) => e.content.droppedBytes === undefined));
});

test("an event holds at most eventBytes; the rest of its interval is counted as dropped", async () => {
  const { events, output } = recorder({ intervalMs: 50, eventBytes: 100, callBytes: 10_000 });
  output.add("stdout", Buffer.from("a".repeat(250)));
  await sleep(80);
  output.end();
  assert.equal(events.length, 1);
  assert.equal(events[0]!.content.stdout, "a".repeat(100));
  assert.equal(events[0]!.content.droppedBytes, 150);
});

test("a call sends at most callBytes, says so once, and reports what followed in its last event", async () => {
  const { events, output } = recorder({ intervalMs: 20, eventBytes: 100, callBytes: 250 });
  for (let i = 0; i < 10; i++) {
    output.add("stdout", Buffer.from("b".repeat(100)));
    await sleep(30);
  }
  output.end();
  const sent = events.reduce((n, e) => n + (e.content.stdout?.length ?? 0), 0);
  assert.equal(sent, 250);
  assert.equal(events.filter((e) => e.content.truncated).length, 1);
  assert.equal(
    events.reduce((n, e) => n + (e.content.droppedBytes ?? 0), 0),
    1000 - 250,
  );
  assert.ok(events.length <= 5, `no event per chunk after the cap (${events.length})`);
});

test("a character split across chunks arrives whole", async () => {
  const { events, output } = recorder();
  const text = Buffer.from("héllo → wörld\n");
  output.add("stdout", text.subarray(0, 2));
  output.add("stdout", text.subarray(2, 9));
  output.add("stdout", text.subarray(9));
  output.end();
  assert.equal(events.map((e) => e.content.stdout).join(""), "héllo → wörld\n");
});

test("close() sends nothing more", async () => {
  const { events, output } = recorder();
  output.add("stdout", Buffer.from("late"));
  output.close();
  await sleep(150);
  output.end();
  assert.deepEqual(events, []);
});
