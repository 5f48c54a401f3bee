import assert from "node:assert/strict";
import { test } from "node:test";
import type { ChildStats, ServiceProcess } from "./host/service-process.ts";
import { settle } from "./idle-settle.ts";

test("settle reads memory after the idle window's plain GC and again after a compacting GC", async () => {
  const calls: string[] = [];
  let reading = 0;
  const svc = {
    async request(type: string, _timeoutMs?: number, args: Record<string, unknown> = {}) {
      calls.push(args.compact ? `${type}:compact` : type);
    },
    async stats() {
      calls.push("stats");
      return { rss: ++reading } as ChildStats;
    },
  } as unknown as ServiceProcess;
  const s = await settle(svc, 1);
  assert.deepEqual(calls, ["stats", "gc", "stats", "gc:compact", "stats"]);
  assert.deepEqual([s.idle.rss, s.after.rss, s.compacted.rss], [1, 2, 3]);
});
