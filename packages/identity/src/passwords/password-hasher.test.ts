import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { loadSettings } from "../config/settings.ts";
import { MAX_HASH_WAIT_MS, PasswordHasher } from "./password-hasher.ts";
import { Semaphore } from "./semaphore.ts";

const params = (hash: string) => /\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$/.exec(hash)?.slice(1).map(Number);

describe("password hashing", () => {
  test("default parameters are argon2id at or above OWASP (m ≥ 19 MiB, t ≥ 2)", async () => {
    const { argon2 } = loadSettings({ IDENTITY_AUTHKEY_KEK: "a".repeat(64), IDENTITY_EMBEDDED_MEMORY: "1" });
    const hasher = new PasswordHasher(argon2);
    const hash = await hasher.hash("correct horse");
    const [m, t, p] = params(hash)!;
    assert.ok(m! >= 19 * 1024, `m=${m}`);
    assert.ok(t! >= 2, `t=${t}`);
    assert.ok(p! >= 1);
    assert.ok(await hasher.verify(hash, "correct horse"));
    assert.equal(await hasher.verify(hash, "Correct horse"), false);
    assert.equal(await hasher.verify("not a hash", "x"), false);
  });

  test("unknown emails verify against a dummy hash of the same cost", async () => {
    const hasher = new PasswordHasher({ memoryKiB: 4096, timeCost: 2, parallelism: 1, maxConcurrent: 2 });
    const real = await hasher.hash("pw");
    assert.deepEqual(params(await hasher.dummyHash()), params(real));
    let runs = 0;
    const run = hasher.semaphore.run.bind(hasher.semaphore);
    hasher.semaphore.run = (fn) => {
      runs++;
      return run(fn);
    };
    assert.equal(await hasher.verifyDummy("pw"), false);
    assert.equal(runs, 1, "the dummy verify does the full argon2 work");
  });

  test("a login burst never runs more hashes at once than the bound", async () => {
    const hasher = new PasswordHasher({ memoryKiB: 2048, timeCost: 1, parallelism: 1, maxConcurrent: 2 });
    const hash = await hasher.hash("pw");
    let running = 0;
    let peak = 0;
    const run = hasher.semaphore.run.bind(hasher.semaphore);
    hasher.semaphore.run = (fn) =>
      run(async () => {
        running++;
        peak = Math.max(peak, running);
        try {
          return await fn();
        } finally {
          running--;
        }
      });
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => hasher.verify(hash, i % 2 ? "pw" : "no")));
    assert.equal(results.filter(Boolean).length, 12);
    assert.equal(peak, 2);
    assert.equal(hasher.semaphore.peak, 2);
  });

  test("semaphore: FIFO, releases on failure", async () => {
    const s = new Semaphore(1);
    const order: number[] = [];
    await Promise.allSettled([
      s.run(async () => {
        order.push(1);
        throw new Error("x");
      }),
      s.run(async () => order.push(2)),
      s.run(async () => order.push(3)),
    ]);
    assert.deepEqual(order, [1, 2, 3]);
    assert.equal(s.waiting, 0);
    assert.throws(() => new Semaphore(0));
  });

  test("a full wait queue refuses at once with 503 unavailable and a retry_after, and frees nothing it did not take", async () => {
    const hasher = new PasswordHasher({ memoryKiB: 1024, timeCost: 1, parallelism: 1, maxConcurrent: 1, maxQueue: 2 });
    const hash = await hasher.hash("pw");
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const holder = hasher.semaphore.run(() => gate);
    const queued = [hasher.verify(hash, "pw"), hasher.verify(hash, "no")];
    assert.equal(hasher.semaphore.full, true);
    const started = performance.now();
    const err = await hasher.verify(hash, "pw").then(
      () => assert.fail("queued beyond the bound"),
      (e: unknown) => e,
    );
    assert.ok(performance.now() - started < 50);
    assert.ok(err instanceof PlatformError);
    assert.deepEqual([err.code, err.reason, err.extra.retry_after], [Code.Unavailable, "unavailable", "1"]);
    release();
    await holder;
    assert.deepEqual(await Promise.all(queued), [true, false]);
    assert.equal(hasher.semaphore.full, false);
  });

  test("admit: logins beyond slots + queue are refused at once, before their database lookup; freed on every outcome", async () => {
    const hasher = new PasswordHasher({ memoryKiB: 1024, timeCost: 1, parallelism: 1, maxConcurrent: 1, maxQueue: 2 });
    let release!: () => void;
    const lookup = new Promise<void>((r) => (release = r));
    // Three logins still at their database lookup: none is hashing yet, the queue is empty.
    const admitted = [0, 1, 2].map((i) =>
      hasher.admit(async () => {
        await lookup;
        return i;
      }),
    );
    assert.equal(hasher.semaphore.waiting, 0);
    let looked = false;
    const err = await hasher
      .admit(async () => {
        looked = true;
      })
      .then(
        () => assert.fail("admitted beyond the bound"),
        (e: unknown) => e,
      );
    assert.equal(looked, false);
    assert.ok(err instanceof PlatformError);
    assert.deepEqual([err.code, err.extra.retry_after], [Code.Unavailable, "1"]);
    release();
    assert.deepEqual(await Promise.all(admitted), [0, 1, 2]);
    await assert.rejects(
      hasher.admit(() => Promise.reject(new Error("lookup failed"))),
      /lookup failed/,
    );
    assert.equal(hasher.admitted, 0);
  });

  test("admit: while hashes are slow, only as many logins as can be hashed within MAX_HASH_WAIT_MS are admitted", async () => {
    // A queue of 1000 would admit everything; the wait bound is what refuses.
    const hasher = new PasswordHasher({
      memoryKiB: 19_456,
      timeCost: 2,
      parallelism: 1,
      maxConcurrent: 1,
      maxQueue: 1000,
    });
    const hash = await hasher.hash("pw");
    for (let i = 0; i < 4; i++) await hasher.verify(hash, "pw");
    const perHash = hasher.hashMs;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // Every call is admitted or refused when made; the admitted ones wait at the gate (their "database lookup").
    const calls = Array.from({ length: 1000 }, () => hasher.admit(() => gate));
    release();
    const outcomes = await Promise.allSettled(calls);
    const admitted = outcomes.filter((o) => o.status === "fulfilled");
    const refused = outcomes.find((o) => o.status === "rejected")?.reason;
    const expected = 1 + Math.floor(MAX_HASH_WAIT_MS / perHash);
    console.log(
      `a hash takes ${perHash.toFixed(0)} ms: ${admitted.length} logins admitted (one slot + ${MAX_HASH_WAIT_MS} ms of queue), the next refused`,
    );
    assert.ok(refused instanceof PlatformError && refused.code === Code.Unavailable, String(refused));
    assert.ok(Math.abs(admitted.length - expected) <= 1, `${admitted.length} admitted, expected ~${expected}`);
  });

  test("a queued hash whose caller is gone leaves the queue and is never run", async () => {
    const s = new Semaphore(1, 10);
    let release!: () => void;
    const holder = s.run(() => new Promise<void>((r) => (release = r)));
    const gone = new AbortController();
    let ran = 0;
    const abandoned = s.run(async () => void ran++, gone.signal);
    const kept = s.run(async () => void ran++);
    assert.equal(s.waiting, 2);
    gone.abort(new Error("client went away"));
    await assert.rejects(abandoned, /client went away/);
    assert.equal(s.waiting, 1);
    release();
    await Promise.all([holder, kept]);
    assert.equal(ran, 1);
    assert.equal(s.waiting, 0);
    // An already aborted caller does not even take a free slot.
    await assert.rejects(
      s.run(async () => void ran++, gone.signal),
      /client went away/,
    );
    assert.equal(ran, 1);
  });
});
