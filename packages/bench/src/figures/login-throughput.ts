import { availableParallelism } from "node:os";
import { ARGON2_DEFAULTS } from "@platform/identity";
import argon2 from "argon2";
import type { Figure } from "../figure.ts";
import { processesCpuMs } from "../host/proc-cpu.ts";
import { HttpLoadClient } from "../http-load-client.ts";
import { pct, saturate } from "../loop.ts";
import { shedAwareLogin } from "../shed-login.ts";
import { OWNER } from "../stack.ts";
import { fmtBytes, fmtRate } from "../stats.ts";

// identity's defaults (ARGON2_MEMORY_KIB, ARGON2_TIME_COST, ARGON2_PARALLELISM,
// ARGON2_MAX_CONCURRENT), which the bench's identity runs with. The baseline
// hashes as many at once as the service may: on a machine shared with other
// work, more threads would also take a larger share of the CPU.
const PARAMS = {
  memoryCost: ARGON2_DEFAULTS.memoryKiB,
  timeCost: ARGON2_DEFAULTS.timeCost,
  parallelism: ARGON2_DEFAULTS.parallelism,
};
const SERVICE_CONCURRENCY = ARGON2_DEFAULTS.maxConcurrent;
const MIB = (ARGON2_DEFAULTS.memoryKiB / 1024).toFixed(0);

/** POST /v1/auth/login per second, against raw argon2id verifies per second at the same parameters. */
export const loginThroughput: Figure = {
  id: "login-throughput",
  title: "login throughput",
  goal: "≥ 90 % of raw argon2id, memory bounded",
  async run(stack, size) {
    const identity = await stack.identity();
    // The floor: the least a login server can do beside its hashes (peers/bare-login.ts), in its own process.
    const floor = await stack.bareLogin();
    const hash = await argon2.hash(OWNER.password, { type: argon2.argon2id, ...PARAMS });
    const raw = async () => {
      if (!(await argon2.verify(hash, OWNER.password))) throw new Error("argon2 verify failed");
    };
    // node:http rather than fetch: the client shares the two cores with the
    // hashing it measures, and fetch costs ~2.5 ms of CPU a request here, node:http ~1 ms.
    const http = new HttpLoadClient(identity.urls.rest, 128);
    const floorHttp = new HttpLoadClient(floor.urls.url!, 8);
    // Shed answers (503 + Retry-After) are waited out and counted, in the windows and in the burst.
    const shed = { windows: 0, burst: 0, floor: 0 };
    const login = (clients: number, phase: keyof typeof shed) => shedAwareLogin(http, OWNER, shed, phase, clients);
    const floorLogin = shedAwareLogin(floorHttp, OWNER, shed, "floor", 8);
    const rounds = size === "quick" ? 1 : 4;
    const windowMs = size === "quick" ? 400 : 4000;
    let r = { ops: 0, seconds: 0 };
    let l = { ops: 0, seconds: 0 };
    let f = { ops: 0, seconds: 0 };
    // CPU (ms) in the windows: this process's while it hashes raw and while it is the logins' client, the servers'.
    const cpuMs = (u: { user: number; system: number }) => (u.user + u.system) / 1000;
    const cpu = { raw: 0, client: 0, identity: 0, floor: 0, database: 0, floorDatabase: 0, floorClient: 0 };
    // PostgreSQL's backends (each login's statements), when its server runs on this machine: on PGlite that work is identity's own.
    // (Its processes are found by name: none where its server runs on another machine.)
    const databaseLocal =
      stack.databaseKind === "postgresql" && processesCpuMs((p) => p.comm === "postgres").processes > 0;
    const databaseMs = () => {
      const c = databaseLocal ? processesCpuMs((p) => p.comm === "postgres") : { user: 0, system: 0 };
      return c.user + c.system;
    };
    try {
      await saturate(SERVICE_CONCURRENCY, 300, raw);
      await saturate(8, 300, login(8, "windows"));
      await saturate(8, 300, floorLogin);
      for (let i = 0; i < rounds; i++) {
        let own = process.cpuUsage();
        const a = await saturate(SERVICE_CONCURRENCY, windowMs, raw);
        cpu.raw += cpuMs(process.cpuUsage(own));
        own = process.cpuUsage();
        const service = (await identity.stats()).cpu;
        const shedBefore = shed.windows;
        let database = databaseMs();
        const b = await saturate(8, windowMs, login(8, "windows"));
        cpu.database += databaseMs() - database;
        b.ops -= shed.windows - shedBefore;
        cpu.client += cpuMs(process.cpuUsage(own));
        cpu.identity += cpuMs((await identity.stats()).cpu) - cpuMs(service);
        const floorCpu = (await floor.stats()).cpu;
        database = databaseMs();
        own = process.cpuUsage();
        const c = await saturate(8, windowMs, floorLogin);
        cpu.floorClient += cpuMs(process.cpuUsage(own));
        cpu.floorDatabase += databaseMs() - database;
        cpu.floor += cpuMs((await floor.stats()).cpu) - cpuMs(floorCpu);
        r = { ops: r.ops + a.ops, seconds: r.seconds + a.seconds };
        l = { ops: l.ops + b.ops, seconds: l.seconds + b.seconds };
        f = { ops: f.ops + c.ops, seconds: f.seconds + c.seconds };
      }
    } finally {
      floorHttp.close();
      await floor.stop();
    }
    const rawRate = r.ops / r.seconds;
    const loginRate = l.ops / l.seconds;
    const floorRate = f.ops / f.seconds;
    const perLogin = (ms: number) => (ms / l.ops).toFixed(2);
    const cores = availableParallelism();
    // Every process's CPU a login (server, client, database) against a raw
    // hash's: the ratio with the cores' idle time taken out, which the
    // wall-clock ratio keeps (raw's two hashes leave a core idle at each
    // hand-off to the event loop and back; the servers' queued logins less).
    const allCpu = {
      login: cpu.identity + cpu.client + cpu.database,
      floor: cpu.floor + cpu.floorClient + cpu.floorDatabase,
    };
    const loginCpuMs = allCpu.login / l.ops;
    const floorCpuMs = allCpu.floor / f.ops;
    const rawCpuMs = cpu.raw / r.ops;
    const busy = {
      raw: cpu.raw / (r.seconds * 1000),
      login: allCpu.login / (l.seconds * 1000),
      floor: allCpu.floor / (f.seconds * 1000),
    };
    const byCpu = `by CPU alone (a raw hash's against a login's in every process: server, client${databaseLocal ? ", database" : ""}) ours ${pct(rawCpuMs, loginCpuMs)}, the floor ${pct(rawCpuMs, floorCpuMs)} (${loginCpuMs.toFixed(2)} and ${floorCpuMs.toFixed(2)} ms a login); cores busy ${busy.raw.toFixed(2)} raw, ${busy.login.toFixed(2)} ours, ${busy.floor.toFixed(2)} the floor, of ${cores}`;
    const ledger = `CPU a raw hash ${rawCpuMs.toFixed(2)} ms (this process); a login ${perLogin(cpu.identity)} ms in identity (hashing threads, event loop, RS256), ${perLogin(cpu.client)} ms in this client, ${(cpu.floor / f.ops).toFixed(2)} ms in the floor server; ${databaseLocal ? `PostgreSQL's processes ${perLogin(cpu.database)} ms a login of ours, ${(cpu.floorDatabase / f.ops).toFixed(2)} ms a login of the floor's (the server is local: its CPU comes out of the same cores)` : stack.databaseKind === "postgresql" ? "PostgreSQL's CPU not counted (its server is not on this machine)" : "the database is inside identity (PGlite)"}`;
    // Memory under a burst far above the hashing concurrency: the semaphore
    // should queue logins, not run 128 argon2 buffers of 19 MiB at once.
    global.gc?.();
    await identity.request("gc");
    const before = await identity.stats();
    let peak = before.rss;
    const burstClients = size === "quick" ? 16 : 128;
    const sampler = setInterval(() => {
      identity.stats().then(
        (s) => (peak = Math.max(peak, s.rss)),
        () => {},
      );
    }, 50);
    let burst: { ops: number; seconds: number };
    try {
      burst = await saturate(burstClients, size === "quick" ? 500 : 5000, login(burstClients, "burst"));
    } finally {
      clearInterval(sampler);
      http.close();
    }
    const growth = peak - before.rss;
    const bounded = growth < 256 * 2 ** 20;
    return {
      baseline: `raw argon2id verify (m=${MIB} MiB, t=${PARAMS.timeCost}, p=${PARAMS.parallelism}), ${SERVICE_CONCURRENCY} at a time: ${fmtRate(rawRate, "hashes/s")}`,
      measured: `${fmtRate(loginRate, "logins/s")}; RSS ${fmtBytes(before.rss)} → peak ${fmtBytes(peak)} under ${burstClients} concurrent clients (${shed.burst} answers of ${burst.ops} were 503 and retried after Retry-After)${shed.windows ? `; in the measured windows ${shed.windows} answers were 503, waited out as told and not counted as logins` : ""}`,
      ratio: `${pct(loginRate, rawRate)} (the floor ${pct(floorRate, rawRate)}; ours ${pct(loginRate, floorRate)} of the floor)`,
      met: loginRate >= 0.9 * rawRate && bounded,
      notes: `${rounds} alternating windows of ${windowMs / 1000} s: raw argon2.verify with ${SERVICE_CONCURRENCY} in flight (the service's ARGON2_MAX_CONCURRENT) in the bench process, then POST /v1/auth/login from 8 keep-alive HTTP/1.1 connections (node:http, not fetch: ~1 ms of client CPU a login instead of ~2.5 ms, on the same cores) to identity in its own process, then the same client and logins against the floor (${fmtRate(floorRate, "logins/s")}${shed.floor ? `, ${shed.floor} answers 503` : ""}: a bare node:http server in its own process doing only what any login must: one statement for the user, argon2id at the same parameters and concurrency, one statement storing the refresh token, an RS256 signature; peers/bare-login.ts) (each login = one argon2id verify + an RS256 signature + two statements: the user with its landing membership, one insert of the refresh-token family and its first token). Memory: identity's RSS sampled every 50 ms during a ${(burst.seconds).toFixed(1)} s burst of ${burstClients} concurrent clients (${fmtRate((burst.ops - shed.burst) / burst.seconds, "logins/s")}; beyond the hashing queue identity answers 503 with Retry-After, which these clients honour); "bounded" = growth under 256 MiB (the argon2 semaphore caps hashing memory at ${SERVICE_CONCURRENCY} × ${MIB} MiB). ${ledger}; ${byCpu}; ${SERVICE_CONCURRENCY} hashes at a time on ${cores} cores${cores <= SERVICE_CONCURRENCY ? ": everything a login costs beside its hash (client, database, HTTP, signing) comes out of the hashes' CPU" : ""}.`,
      raw: {
        rawRate,
        loginRate,
        floorRate,
        cpuMsPerLoginFloor: cpu.floor / f.ops,
        cpuRatioLogin: rawCpuMs / loginCpuMs,
        cpuRatioFloor: rawCpuMs / floorCpuMs,
        coresBusy: busy,
        ...(databaseLocal
          ? { databaseCpuMsPerLogin: cpu.database / l.ops, databaseCpuMsPerLoginFloor: cpu.floorDatabase / f.ops }
          : {}),
        rssBefore: before.rss,
        rssPeak: peak,
        burstShed: shed.burst,
        windowsShed: shed.windows,
        burstAnswers: burst.ops,
        cpuMsPerRawHash: cpu.raw / r.ops,
        cpuMsPerLoginIdentity: cpu.identity / l.ops,
        cpuMsPerLoginClient: cpu.client / l.ops,
      },
    };
  },
};
