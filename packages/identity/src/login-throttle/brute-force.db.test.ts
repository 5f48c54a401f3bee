// test-timeout: 480000
// Issue 14 item 11 through the real HTTP server: failed logins back off per
// account and per client address (429 + Retry-After, growing), unknown
// emails exactly like known ones, other accounts undelayed, a correct
// password after the window works, and a flood beyond the hashing queue
// gets fast 503s.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type TestServer, startTestServer } from "../testing/server.ts";

const OWNER = { email: "owner@example.com", password: "owner-password-1" };
const servers: TestServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function server(env: Record<string, string>): Promise<TestServer> {
  const s = await startTestServer(env);
  servers.push(s);
  return s;
}

async function login(s: TestServer, email: string, password: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const r = await s.call("POST", "/v1/auth/login", { body: { email, password }, headers });
  return { ...r, ms: performance.now() - started, retryAfter: r.headers.get("retry-after") };
}

/** A user who can log in (a member of the bootstrap org). */
async function member(s: TestServer, email: string, password: string) {
  const user = await s.identity.users.create({ email, name: "Member", password });
  const orgId = (await s.identity.db.selectFrom("orgs").select("id").executeTakeFirstOrThrow()).id;
  await s.identity.db.insertInto("memberships").values({ user_id: user.id, org_id: orgId, role: "member" }).execute();
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};

describe("per account", () => {
  let s: TestServer;
  before(async () => {
    s = await server({
      LOGIN_THROTTLE_ACCOUNT_FAILURES: "3",
      LOGIN_THROTTLE_ADDRESS_FAILURES: "100000",
      LOGIN_THROTTLE_BASE_DELAY: "1s",
    });
  });

  /** Free failures, then each wait-and-fail doubles the block; returns what the client saw. */
  async function hammer(email: string) {
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await login(s, email, "wrong-password");
      seen.push(`${r.status}`);
    }
    const retryAfters: number[] = [];
    for (let round = 0; round < 3; round++) {
      const blocked = await login(s, email, "wrong-password");
      seen.push(`${blocked.status} ${blocked.json?.code}`);
      assert.equal(blocked.status, 429, blocked.text);
      assert.equal(blocked.json.code, "too_many_attempts");
      assert.equal(typeof blocked.json.message, "string");
      retryAfters.push(Number(blocked.retryAfter));
      await sleep(Number(blocked.retryAfter) * 1000);
      if (round < 2) seen.push(`${(await login(s, email, "wrong-password")).status}`);
    }
    return { seen, retryAfters };
  }

  test("failed logins → 429 too_many_attempts with a Retry-After that grows; an unknown email is throttled identically", async () => {
    const [known, unknown] = await Promise.all([hammer(OWNER.email), hammer("nobody-here@example.com")]);
    assert.deepEqual(known.seen.slice(0, 4), ["401", "401", "401", "401"]);
    assert.deepEqual(known.retryAfters, [1, 2, 4]);
    // Same statuses, codes and waits whether or not the account exists.
    assert.deepEqual(unknown, known);
  });

  test("the email's case does not make a new account key", async () => {
    for (let i = 0; i < 4; i++) await login(s, "Case-Test@Example.com", "x-wrong");
    assert.equal((await login(s, "CASE-TEST@example.COM", "x-wrong")).status, 429);
  });

  test("a correct password is refused during the backoff, works after it, and clears the count", async () => {
    const email = `patient-${Date.now()}@example.com`;
    await member(s, email, "patient-password");
    for (let i = 0; i < 4; i++) assert.equal((await login(s, email, "wrong")).status, 401);
    const blocked = await login(s, email, "patient-password");
    assert.equal(blocked.status, 429);
    await sleep(Number(blocked.retryAfter) * 1000);
    const ok = await login(s, email, "patient-password");
    assert.equal(ok.status, 200, ok.text);
    // Cleared: the next three failures are free again.
    for (let i = 0; i < 3; i++) assert.equal((await login(s, email, "wrong")).status, 401);
  });
});

describe("no one else is delayed", () => {
  test("while a throttled account is hammered, its attempts never reach argon2, so another account's logins do not queue behind them", async () => {
    // Real argon2 cost and one hashing slot: a throttled attempt that hashed would queue this login behind it.
    const s = await server({
      ARGON2_MEMORY_KIB: "19456",
      ARGON2_TIME_COST: "2",
      ARGON2_MAX_CONCURRENT: "1",
      LOGIN_THROTTLE_ACCOUNT_FAILURES: "3",
      LOGIN_THROTTLE_ADDRESS_FAILURES: "100000",
      LOGIN_THROTTLE_BASE_DELAY: "1m",
    });
    const other = { email: `other-${Date.now()}@example.com`, password: "other-password-1" };
    await member(s, other.email, other.password);
    const victim = "victim@example.com";
    for (let i = 0; i < 4; i++) await login(s, victim, "guess");

    const baseline: number[] = [];
    for (let i = 0; i < 5; i++) baseline.push((await login(s, other.email, other.password)).ms);

    const semaphore = s.identity.hasher.semaphore;
    const run = semaphore.run.bind(semaphore);
    let hashes = 0;
    semaphore.run = (fn) => {
      hashes++;
      return run(fn);
    };
    let stop = false;
    const refusals: number[] = [];
    const attacker = (async () => {
      while (!stop) {
        const batch = await Promise.all(Array.from({ length: 5 }, () => login(s, victim, "guess")));
        for (const r of batch) {
          assert.equal(r.status, 429, r.text);
          refusals.push(r.ms);
        }
      }
    })();
    const during: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await login(s, other.email, other.password);
      assert.equal(r.status, 200);
      during.push(r.ms);
    }
    stop = true;
    await attacker;
    semaphore.run = run;
    const b = percentile(baseline, 50);
    const d = percentile(during, 50);
    console.log(
      `other account login p50: ${b.toFixed(1)} ms alone, ${d.toFixed(1)} ms while ${refusals.length} throttled attempts ran (429 p50 ${percentile(refusals, 50).toFixed(1)} ms, p99 ${percentile(refusals, 99).toFixed(1)} ms)`,
    );
    assert.ok(refusals.length >= 10, `${refusals.length} attempts`);
    // Only the other account's five logins hashed: the throttled attempts never
    // take a hashing slot, so they cannot queue ahead of it. (Its latency is
    // printed, not bounded: a ratio of 5 samples each swung past 3x at a load
    // average of 20 in CI, on PGlite, from the attacker's own database reads.)
    assert.equal(hashes, 5);
  });
});

describe("per client address", () => {
  test("behind a trusted proxy: failures across many emails from one address throttle that address only", async () => {
    const s = await server({
      LOGIN_TRUSTED_PROXY_HOPS: "1",
      LOGIN_THROTTLE_ADDRESS_FAILURES: "3",
      LOGIN_THROTTLE_ACCOUNT_FAILURES: "100000",
    });
    const from = (ip: string) => ({ "x-forwarded-for": ip });
    for (let i = 0; i < 4; i++)
      assert.equal((await login(s, `spray-${i}@example.com`, "guess", from("203.0.113.7"))).status, 401);
    const blocked = await login(s, "spray-9@example.com", "guess", from("203.0.113.7"));
    assert.equal(blocked.status, 429);
    assert.equal(blocked.retryAfter, "1");
    // Even the right password waits: the address, not the account, is throttled.
    assert.equal((await login(s, OWNER.email, OWNER.password, from("203.0.113.7"))).status, 429);
    assert.equal((await login(s, OWNER.email, OWNER.password, from("198.51.100.4"))).status, 200);
    assert.equal((await login(s, "spray-9@example.com", "guess", from("198.51.100.4"))).status, 401);
  });

  test("without a trusted proxy X-Forwarded-For is ignored: rotating it does not evade the address throttle", async () => {
    const s = await server({ LOGIN_THROTTLE_ADDRESS_FAILURES: "3", LOGIN_THROTTLE_ACCOUNT_FAILURES: "100000" });
    for (let i = 0; i < 4; i++) await login(s, `rot-${i}@example.com`, "guess", { "x-forwarded-for": `192.0.2.${i}` });
    assert.equal((await login(s, "rot-9@example.com", "guess", { "x-forwarded-for": "192.0.2.99" })).status, 429);
  });
});

describe("password-hashing queue", () => {
  test("a flood larger than the queue gets fast 503 unavailable with Retry-After, and the queue's own logins still answer", async () => {
    const s = await server({
      ARGON2_MAX_CONCURRENT: "1",
      ARGON2_MAX_QUEUE: "4",
      // Enough work per hash that the flood outruns the queue.
      ARGON2_MEMORY_KIB: "8192",
      ARGON2_TIME_COST: "3",
      LOGIN_THROTTLE_ACCOUNT_FAILURES: "100000",
      LOGIN_THROTTLE_ADDRESS_FAILURES: "100000",
    });
    // One login's worth of hashing, alone: a queue without bound would make the last of the flood wait ~80 of these.
    const alone: number[] = [];
    for (let i = 0; i < 3; i++) alone.push((await login(s, OWNER.email, "warm-up-wrong")).ms);
    const single = percentile(alone, 50);
    const flood = await Promise.all(Array.from({ length: 80 }, (_, i) => login(s, `flood-${i}@example.com`, "guess")));
    const refused = flood.filter((r) => r.status === 503);
    const answered = flood.filter((r) => r.status === 401);
    assert.equal(refused.length + answered.length, flood.length, flood.map((r) => r.status).join(","));
    assert.ok(refused.length >= 40, `only ${refused.length} of 80 refused`);
    for (const r of refused) {
      assert.equal(r.json.code, "unavailable");
      assert.equal(r.retryAfter, "1");
    }
    const p99Refused = percentile(
      refused.map((r) => r.ms),
      99,
    );
    const p50Answered = percentile(
      answered.map((r) => r.ms),
      50,
    );
    console.log(
      `single wrong-password login ${single.toFixed(1)} ms; flood of 80: ${refused.length} refused (503) p50 ${percentile(
        refused.map((r) => r.ms),
        50,
      ).toFixed(
        1,
      )} ms p99 ${p99Refused.toFixed(1)} ms; ${answered.length} answered (401) p50 ${p50Answered.toFixed(1)} ms`,
    );
    // A refusal waits for no hash: below what an unbounded queue would cost the flood's tail (80 hashes in a
    // row). The margin is wide on purpose: 80 connections on one event loop of a loaded 2-core CI machine
    // took 0.8 s at p99 once, and this is a guard against queueing, not a speed test.
    assert.ok(
      p99Refused < flood.length * single,
      `p99 of refusals ${p99Refused.toFixed(1)} ms vs ${single.toFixed(1)} ms per login`,
    );
    // Refusals were not counted as failed guesses: the owner still logs in at once.
    assert.equal((await login(s, OWNER.email, OWNER.password)).status, 200);
  });
});
