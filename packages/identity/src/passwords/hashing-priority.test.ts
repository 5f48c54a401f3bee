import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { getPriority } from "node:os";
import { test } from "node:test";
import argon2 from "argon2";
import { lowerThreadpoolPriority, threadpoolIds } from "./hashing-priority.ts";

/** A thread's time on a CPU so far, ns (schedstat: /proc/.../stat counts in 10 ms ticks, coarser than a hash). */
const cpuOf = (tid: number) => Number(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ")[0]);

test("libuv's threadpool threads, where argon2 hashes, get the nice value; the event loop's thread keeps its own", {
  skip: process.platform !== "linux" && "thread priorities by /proc are Linux only",
}, async () => {
  const pool = await threadpoolIds();
  assert.equal(pool.length, Number(process.env.UV_THREADPOOL_SIZE ?? 4), `pool threads found: ${pool}`);
  assert.ok(!pool.includes(process.pid));
  const before = getPriority(process.pid);

  const changed = await lowerThreadpoolPriority(10);
  assert.deepEqual([...changed].sort(), [...pool].sort());
  for (const tid of pool) assert.equal(getPriority(tid), Math.min(19, before + 10), `thread ${tid}`);
  assert.equal(getPriority(process.pid), before, "the event loop's thread is not lowered");

  // The hashes run on those threads (the ones whose CPU time grows), not elsewhere.
  const cpu = new Map(pool.map((tid) => [tid, cpuOf(tid)]));
  const hash = await argon2.hash("password", { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2 });
  await Promise.all(Array.from({ length: 8 }, () => argon2.verify(hash, "password")));
  const grew = pool.filter((tid) => cpuOf(tid) > cpu.get(tid)!);
  assert.ok(grew.length > 0, "no pool thread did the hashing");

  // Again: nothing to change, the same threads reported.
  assert.deepEqual([...(await lowerThreadpoolPriority(10))].sort(), [...pool].sort());
  assert.deepEqual(await lowerThreadpoolPriority(0), []);
});

test("the steps are below the process's own priority: a service started at nice 3 hashes at 13, not 10", {
  skip: process.platform !== "linux" && "thread priorities by /proc are Linux only",
}, () => {
  const script = `
    import { getPriority } from "node:os";
    import { lowerThreadpoolPriority } from ${JSON.stringify(new URL("./hashing-priority.ts", import.meta.url).href)};
    const changed = await lowerThreadpoolPriority(10);
    console.log(JSON.stringify({ own: getPriority(process.pid), pool: changed.map((tid) => getPriority(tid)) }));
  `;
  const out = execFileSync(
    "nice",
    ["-n", "3", process.execPath, "--import", "tsx", "--input-type=module", "-e", script],
    {
      encoding: "utf8",
    },
  );
  const { own, pool } = JSON.parse(out.trim().split("\n").at(-1)!) as { own: number; pool: number[] };
  assert.equal(own, Math.min(19, getPriority(process.pid) + 3));
  assert.ok(pool.length > 0, "no pool thread found");
  for (const nice of pool) assert.equal(nice, Math.min(19, own + 10));
});
