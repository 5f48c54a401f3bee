// test-timeout: 480000
// Issue 15 item 4 against the real identity service: a storm of 2,000
// concurrent logins (distinct emails and client addresses, from four client
// processes over 2,000 connections) is shed, not queued. Excess logins get
// 503/429 with Retry-After, the service spends well under a second on a
// refusal, nothing is answered after REQUEST_TIMEOUT, the event loop stays
// responsive, users/me, VerifyToken, GetPublicKey and /livez keep answering
// on connections already open, and a fresh login works within seconds after.
// A peer that answers 503 at once takes the same storm first: what clients
// see from it is what this machine's load allows, printed beside ours.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import http from "node:http";
import { getPriority, loadavg } from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient } from "@connectrpc/connect";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { ARGON2_DEFAULTS } from "../config/settings.ts";
import { threadpoolIds } from "../passwords/hashing-priority.ts";
import { buildStormClient, nativeStorm } from "../testing/login-storm-native.ts";
import { startTestServer, type TestServer } from "../testing/server.ts";

const PROCESSES = 4;
const LOGINS_PER_PROCESS = 500;
// One connection per login: 2,000 concurrent clients, none queued client-side.
const SOCKETS_PER_PROCESS = LOGINS_PER_PROCESS;
const REQUEST_TIMEOUT_MS = 10_000;
/** The listen backlog of the platform's servers (@platform/rpc listen-limits.ts), for the peer. */
const PEER_BACKLOG = 4096;

type Answer = { status: number; retryAfter?: string | null; ms: number; error?: string };

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const fmt = (ms: number) => `${ms.toFixed(0)} ms`;

/**
 * The C storm client (login-storm-client.c) where this machine can build it:
 * 2,000 connections from one epoll loop at ~0.1 s of CPU for the whole storm,
 * so what the clients see is the server's time and the machine's, not the
 * clients' own (the Node clients' four processes take ~1 s of CPU each on
 * the same cores). Undefined: the Node clients.
 */
let nativeClient: string | undefined;

/** The same storm against `url`: one C client process, else the Node clients' processes; the answers together. */
async function storm(url: string): Promise<Answer[]> {
  if (nativeClient) return (await nativeStorm(nativeClient, url, PROCESSES * LOGINS_PER_PROCESS, "n")).answers;
  return (await Promise.all(Array.from({ length: PROCESSES }, (_, p) => stormProcess(url, `p${p}`)))).flat();
}

/**
 * The peer: a server that answers every request 503 at once, in a process
 * of its own. What the storm's clients see from it is what this machine,
 * under its current load, can do at all; the identity service is held to
 * it, not to numbers of a quiet machine.
 */
async function peerStorm(): Promise<{ answers: Answer[]; cpuMs: number }> {
  const code = `const s = require("node:http").createServer((q, r) => { q.resume(); q.on("end", () => { r.writeHead(503, { "retry-after": "1" }); r.end("{}"); }); });
    s.listen(0, "127.0.0.1", ${PEER_BACKLOG}, () => console.log(s.address().port));`;
  const peer = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const port = await new Promise<number>((resolve) =>
      peer.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))),
    );
    const cpuBefore = threadCpuMs(peer.pid!, peer.pid!);
    const answers = await storm(`http://127.0.0.1:${port}`);
    return { answers, cpuMs: threadCpuMs(peer.pid!, peer.pid!) - cpuBefore };
  } finally {
    peer.kill();
  }
}

function stormProcess(url: string, prefix: string): Promise<Answer[]> {
  const config = JSON.stringify({
    url,
    count: LOGINS_PER_PROCESS,
    sockets: SOCKETS_PER_PROCESS,
    prefix,
    password: "storm-password",
  });
  const child = spawn(
    process.execPath,
    [new URL("../testing/login-storm-client.mjs", import.meta.url).pathname, config],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`storm client exited ${code}`)),
    );
  });
}

/**
 * How many of this process's descriptors are the listening socket of
 * 127.0.0.1:`port` (Linux: its inode in /proc/net/tcp, then /proc/self/fd).
 */
function listeningDescriptors(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const row = readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    // local_address "0100007F:PORT", state 0A (LISTEN), inode in the tenth column.
    .find((c) => c[1] === `0100007F:${hexPort}` && c[3] === "0A");
  assert.ok(row, `no listening socket on 127.0.0.1:${port}`);
  const target = `socket:[${row[9]}]`;
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === target;
    } catch {
      return false;
    }
  }).length;
}

/** CPU time (user + system) of thread `tid` of process `pid`, in ms; NaN off Linux. */
function threadCpuMs(pid: number, tid: number): number {
  if (process.platform !== "linux") return Number.NaN;
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks (100 Hz).
  const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
/** CPU time of this process's main thread (its event loop), in ms. */
const mainThreadCpuMs = () => threadCpuMs(process.pid, process.pid);

let s: TestServer;
before(async () => {
  nativeClient = await buildStormClient();
  s = await startTestServer({
    // The production defaults: real argon2 cost, two hashes at once, a queue of 32.
    ARGON2_MEMORY_KIB: "19456",
    ARGON2_TIME_COST: "2",
    REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS / 1000}s`,
    // Many clients behind one trusted proxy: the per-address throttle sees each as its own.
    LOGIN_TRUSTED_PROXY_HOPS: "1",
    // "info": each request's closing line carries the server's own time for it.
    LOG_LEVEL: "info",
  });
});
after(() => s?.close());

// At load 25 on 2 cores the clients need ~2 minutes to get all their answers.
test("a login storm is shed at once, cheap endpoints keep answering, and the service is idle again within seconds", {
  timeout: 400_000,
}, async () => {
  // The REST port is accepted on 8 descriptors of its socket (rpc acceptHandles), so a
  // storm's connections leave the listen queue up to 8 a loop turn, not one.
  if (process.platform === "linux") assert.equal(listeningDescriptors(Number(new URL(s.base).port)), 8);
  const { access_token: token } = await s.login();
  const auth = createClient(AuthService, s.grpcTransport("agents"));
  const kid = (await auth.verifyToken({ token })).context!.authKeyId;
  // One kept-alive connection for the REST probes, made before the storm, as
  // a client already connected would have: a new connection waits in the
  // listen queue behind the storm's, which measures the machine, not the service.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  after(() => agent.destroy());
  // A kept-alive socket the server closed (its idle timeout) just as a request went out on it
  // resets: Node's documented race, and such a GET is sent again once on a new socket.
  const get = (path: string, headers: Record<string, string> = {}, retried = false): Promise<number> =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(`${s.base}${path}`, { agent, headers }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", (err: NodeJS.ErrnoException) => {
        if (!retried && req.reusedSocket && err.code === "ECONNRESET") resolve(get(path, headers, true));
        else reject(err);
      });
    });
  const probes = {
    "users/me": async () => {
      assert.equal(await get("/v1/users/me", { authorization: `Bearer ${token}` }), 200);
    },
    VerifyToken: async () => {
      await auth.verifyToken({ token });
    },
    GetPublicKey: async () => {
      await auth.getPublicKey({ kid });
    },
    livez: async () => {
      assert.equal(await get("/livez"), 200);
    },
  };
  type Probe = keyof typeof probes;
  const timed = async (name: Probe) => {
    const started = performance.now();
    await probes[name]();
    return performance.now() - started;
  };
  /**
   * Each probe in a loop of its own until `stop()`, its latencies by name.
   * Apart, so one slow probe leaves no other's connection idle long enough
   * for the server to close it (keep-alive timeout 5 s).
   */
  const probeLoop = (stop: () => boolean, minRounds: number) => {
    const seen: Record<Probe, number[]> = { "users/me": [], VerifyToken: [], GetPublicKey: [], livez: [] };
    const done = Promise.all(
      (Object.keys(probes) as Probe[]).map(async (name) => {
        for (let round = 0; round < minRounds || !stop(); round++) {
          seen[name].push(await timed(name));
          await sleep(20);
        }
      }),
    );
    return { seen, done };
  };

  const idle = probeLoop(() => true, 30);
  await idle.done;

  const { answers: peer, cpuMs: peerCpuMs } = await peerStorm();
  const peerMs = peer.map((a) => a.ms);

  let storming = true;
  const during = probeLoop(() => !storming, 1);
  // The service runs in this process: its event loop's delay is this one's.
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const stormStarted = performance.now();
  // The event loop's own CPU (the main thread's, not the hashing threads'; the probes' client side included).
  const loopCpuBefore = mainThreadCpuMs();
  const answers = await storm(s.base);
  const stormMs = performance.now() - stormStarted;
  const loopCpuMs = mainThreadCpuMs() - loopCpuBefore;
  loop.disable();
  storming = false;
  await during.done;

  // Idle again: the owner's own login answers 200 quickly, and nothing waits any more.
  const ended = performance.now();
  let recoveredMs = Number.NaN;
  for (;;) {
    const started = performance.now();
    const r = await s.call("POST", "/v1/auth/login", {
      body: { email: "owner@example.com", password: "owner-password-1" },
    });
    if (r.status === 200 && performance.now() - started < 1000) {
      recoveredMs = performance.now() - ended;
      break;
    }
    assert.ok(performance.now() - ended < 30_000, `no quick login 30 s after the storm (last: ${r.status})`);
    await sleep(100);
  }

  // Refusals as requests enter are logged as counts once a second (rpc requests.ts REFUSALS_LOG_MS).
  await sleep(1200);
  type Line = {
    msg?: string;
    path?: string;
    ms?: number;
    status?: number;
    acceptMs?: number;
    count?: number;
    maxMs?: number;
  };
  const lines = s.logs.lines.map((l) => JSON.parse(l) as Line);
  const logged = lines.filter((l) => l.msg === "request" && l.path === "/v1/auth/login");
  const early = lines.filter((l) => l.msg === "requests refused before routing" && l.path === "/v1/auth/login");
  const earlyCount = early.reduce((n, l) => n + l.count!, 0);
  const earlyMaxMs = Math.max(0, ...early.map((l) => l.maxMs!));
  const serverMs = [...logged.map((l) => l.ms!), earlyMaxMs];
  const serverShedMs = [
    ...logged.filter((l) => l.status === 503 || l.status === 429).map((l) => l.ms!),
    ...early.map((l) => l.maxMs!),
  ];
  // From the service's accept of a connection to its first request's handler (rpc accept-wait.ts).
  const acceptMs = logged.flatMap((l) => (l.acceptMs === undefined ? [] : [l.acceptMs]));
  const byStatus = new Map<number | string, Answer[]>();
  for (const a of answers) byStatus.set(a.error ?? a.status, [...(byStatus.get(a.error ?? a.status) ?? []), a]);
  const shed = answers.filter((a) => a.status === 503 || a.status === 429);
  const served = answers.filter((a) => a.status === 401);
  const by = (seen: Record<Probe, number[]>, p: number) =>
    Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, percentile(v, p)])) as Record<Probe, number>;
  const [idleP90, idleP99, duringP90, duringP99] = [
    by(idle.seen, 90),
    by(idle.seen, 99),
    by(during.seen, 90),
    by(during.seen, 99),
  ];
  console.log(
    [
      `storm: ${answers.length} logins from ${nativeClient ? "one C client process" : `${PROCESSES} Node processes`} in ${fmt(stormMs)}; statuses ${[...byStatus].map(([k, v]) => `${k}×${v.length}`).join(" ")}`,
      `shed (503/429): p50 ${fmt(
        percentile(
          shed.map((a) => a.ms),
          50,
        ),
      )} p99 ${fmt(
        percentile(
          shed.map((a) => a.ms),
          99,
        ),
      )} max ${fmt(Math.max(...shed.map((a) => a.ms)))}`,
      `peer (answers 503 at once) under the same storm: p50 ${fmt(percentile(peerMs, 50))} p99 ${fmt(percentile(peerMs, 99))} (${peer.filter((a) => a.status === 503).length} answered); its process used ${fmt(peerCpuMs)} of CPU: ${(peerCpuMs / peer.length).toFixed(2)} ms a request`,
      `refused as they entered: ${earlyCount} (slowest ${fmt(earlyMaxMs)} in the service); server-side time of a refusal: p99 ${fmt(percentile(serverShedMs, 99))}; of any login: p99 ${fmt(percentile(serverMs, 99))} max ${fmt(Math.max(...serverMs))}`,
      `accept to handler in the service: p50 ${fmt(percentile(acceptMs, 50))} p99 ${fmt(percentile(acceptMs, 99))} (the rest of a client's wait is in the kernel's accept queue); load average ${loadavg()[0]!.toFixed(1)}`,
      `the event loop's thread used ${fmt(loopCpuMs)} of CPU during the storm: ${(loopCpuMs / answers.length).toFixed(2)} ms a login (Linux; 10 ms resolution)`,
      `event loop delay during the storm: p50 ${fmt(loop.percentile(50) / 1e6)} p99 ${fmt(loop.percentile(99) / 1e6)} max ${fmt(loop.max / 1e6)}`,
      `answered (401): p50 ${fmt(
        percentile(
          served.map((a) => a.ms),
          50,
        ),
      )} p99 ${fmt(
        percentile(
          served.map((a) => a.ms),
          99,
        ),
      )}; slowest answer ${fmt(Math.max(...answers.map((a) => a.ms)))}`,
      ...(Object.keys(probes) as Probe[]).map(
        (k) =>
          `${k}: idle p90 ${fmt(idleP90[k])} p99 ${fmt(idleP99[k])}; during the storm p90 ${fmt(duringP90[k])} p99 ${fmt(duringP99[k])} max ${fmt(Math.max(...during.seen[k]))} (${during.seen[k].length} calls)`,
      ),
      `owner login answered 200 within 1 s ${fmt(recoveredMs)} after the storm ended`,
    ].join("\n"),
  );

  // Every login got an answer: a verdict, a refusal, or (504) its deadline.
  // A handful of connections reset by a machine this loaded are the kernel's, not an answer of the service.
  const lost = answers.filter((a) => a.status === 0);
  assert.ok(lost.length <= answers.length / 100, `${lost.length} connections failed: ${lost[0]?.error}`);
  for (const a of answers)
    if (a.status !== 0) assert.ok([401, 429, 503, 504].includes(a.status), `unexpected answer ${a.status}`);
  for (const a of shed) assert.ok(a.retryAfter && Number(a.retryAfter) >= 1, `a ${a.status} without Retry-After`);
  // Most of the storm cannot be served in time: it must be refused, not queued.
  assert.ok(shed.length >= answers.length / 2, `only ${shed.length} of ${answers.length} shed`);
  // ...and nearly all of it as the requests enter, before routing, body decoding or the hashing queue
  // (rpc ServerOptions.shed asked first by the request entry; the handler's own refusals are the rest).
  assert.ok(earlyCount >= shed.length * 0.9, `only ${earlyCount} of ${shed.length} refusals as they entered`);
  // A refusal waits for no work: well under a second inside the service...
  assert.ok(
    percentile(serverShedMs, 99) < 1000,
    `refusals took ${fmt(percentile(serverShedMs, 99))} at p99 in the service`,
  );
  // The hashing threads yield the CPU to the event loop that accepts and
  // refuses (ARGON2_THREAD_NICE; the service runs in this process, so its
  // libuv threadpool is this one's). At load ~4 on 2 cores the clients' p99
  // was 2.2 s with them niced against 2.9-3.5 s without, the peer's ~0.5 s.
  if (process.platform === "linux") {
    const pool = await threadpoolIds();
    assert.ok(pool.length > 0);
    for (const tid of pool) assert.ok(getPriority(tid) >= ARGON2_DEFAULTS.threadNice, `pool thread ${tid} not niced`);
  }
  // What the clients see on top is the wait in the listen queue for the
  // service's turn at the CPU, held to what the peer got under the same
  // storm: 2.8-3.2x its p99 with 8 accept handles at load 2.5-3.6 (3.4-4.5x
  // with one; before the hashing threads were niced 6.3-7.3x, 10-14x at load
  // 20); the bound leaves room for a loaded CI machine.
  const shedP99 = percentile(
    shed.map((a) => a.ms),
    99,
  );
  const peerP99 = percentile(peerMs, 99);
  assert.ok(
    shedP99 < 10 * peerP99 + 2000,
    `refusals reached the clients at p99 ${fmt(shedP99)}, the peer's at ${fmt(peerP99)}`,
  );
  assert.ok(loop.percentile(99) / 1e6 < 1000, `event loop delay p99 ${fmt(loop.percentile(99) / 1e6)}`);
  // The deadline holds end to end: the service answers nothing after REQUEST_TIMEOUT.
  assert.ok(
    Math.max(...serverMs) < REQUEST_TIMEOUT_MS + 1000,
    `a login took ${fmt(Math.max(...serverMs))} in the service`,
  );
  // Cheap calls keep answering. p90, not p99: on a machine at load 25 the
  // whole process stalls for seconds now and then (event loop max above),
  // which no code of the service causes or can prevent; the p99 is printed.
  for (const k of Object.keys(probes) as Probe[]) {
    assert.ok(
      duringP90[k] < 10 * idleP90[k] + 1000,
      `${k} p90 ${fmt(duringP90[k])} during the storm vs ${fmt(idleP90[k])} idle`,
    );
  }
  assert.ok(recoveredMs < 5000, `a fresh login took until ${fmt(recoveredMs)} after the storm`);
  assert.equal(s.identity.hasher.semaphore.waiting, 0);
  assert.equal(s.identity.hasher.admitted, 0);
});
