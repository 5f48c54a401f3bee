// A service under test in its own process, driven over IPC by the bench
// runner: `node <bundle of child.ts> <identity|compute|agents|bare-sse|bare-grpc|bare-exec|bare-login>`
// with the launcher's flags (service-process.ts; BENCH_CHILD_TSX=1: through
// tsx). It starts the real service factory on ephemeral ports, sends {type:"ready", urls},
// and answers {type:"stats"} with its memory and event-loop lag, so the
// runner measures the service's process, not its own. With BENCH_PEER=grpc-js
// identity and compute serve their own implementations under grpc-js instead
// (the peers of src/peers/); bare-sse is the bare SSE server peer, bare-grpc
// the bare gRPC server the API key latency figure's tail is compared with,
// bare-exec the bare server streaming a command's stdout (exec throughput's floor), bare-login
// the bare login server (the login figure's floor), bare-token-source and bare-token-relay the
// per-token figure's hops floor.
import * as fs from "node:fs";
import { join } from "node:path";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { destination, pino } from "pino";
import { BenchModel } from "./bench-model.ts";
import { compactingGc } from "./compact-gc.ts";

type Msg = { id: number; type: string; [k: string]: unknown };

const kind = process.argv[2];
// Event-loop delay, sampled from a figure's resetLag to its end (lagOff, from the runner): a 1 ms
// timer left on for the whole run cost each service process ~3 % of a core while it sat idle
// (most of the run: the figures take turns), which was a good part of the smoke test's CPU.
const lag = monitorEventLoopDelay({ resolution: 1 });
// The process's GC pauses since the last resetLag: a latency tail is told apart from them.
const gc = { count: 0, totalMs: 0, maxMs: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.count++;
    gc.totalMs += e.duration;
    gc.maxMs = Math.max(gc.maxMs, e.duration);
  }
}).observe({ entryTypes: ["gc"] });
// To stderr, which the bench passes through (its stdout is the results table).
const logger = pino({ level: process.env.LOG_LEVEL ?? "warn" }, destination(2));

let closeService: () => Promise<void> = async () => {};
let extra: (msg: Msg) => unknown = () => undefined;
// Synchronous last-resort cleanup when the runner has to signal us (a close that hung).
let onTerminate: () => void = () => {};
process.once("SIGTERM", () => {
  onTerminate();
  process.exit(0);
});

async function start(): Promise<Record<string, string>> {
  if (kind === "identity") {
    const { loadSettings, startApp } = await import("@platform/identity");
    const { internalTlsFromEnv } = await import("@platform/rpc");
    const settings = loadSettings(process.env);
    const internalTls = internalTlsFromEnv(process.env, "identity");
    const app = await startApp(settings, { internalTls });
    closeService = () => app.close();
    if (process.env.BENCH_PEER === "grpc-js") {
      // The peer: the same AuthService implementation under a grpc-js server (its grpc URL); REST stays ours.
      const { AuthService } = await import("@platform/gen/identity/v1/auth_pb");
      const { authService } = await import("../../../identity/src/server/handlers.ts");
      const { IDENTITY_CALLERS } = await import("../../../identity/src/server/servers.ts");
      const { serveOnGrpcJs } = await import("../peers/grpc-js-server.ts");
      const peer = await serveOnGrpcJs(AuthService, authService(app.identity), {
        host: settings.host,
        tls: internalTls,
        callers: IDENTITY_CALLERS,
      });
      closeService = () => peer.close().then(() => app.close());
      return { rest: app.urls.rest, grpc: peer.url };
    }
    return { rest: app.urls.rest, grpc: app.urls.grpc };
  }
  if (kind === "compute") {
    const { createComputeApp, LocalDriver, loadConfig } = await import("@platform/compute");
    const { internalTlsFromEnv } = await import("@platform/rpc");
    const config = loadConfig(process.env);
    const prefix = process.env.BENCH_CGROUP_PREFIX ?? `platform-bench-${process.pid}`;
    const driver = new LocalDriver({
      dataDir: config.dataDir,
      cgroupPrefix: prefix,
      logger,
      releasePausedAfterMs: config.pauseReleaseMs,
    });
    const internalTls = internalTlsFromEnv(process.env, "compute");
    const app = await createComputeApp(config, logger, { driver, internalTls });
    let closePeer = async () => {};
    let url: string;
    if (process.env.BENCH_PEER === "grpc-js") {
      // The peer: the same ComputeService implementation (over the same domain and driver) under grpc-js.
      const { ComputeService } = await import("@platform/gen/compute/v1/compute_pb");
      const { computeServiceImpl } = await import("@platform/compute");
      const { COMPUTE_CALLERS } = await import("../../../compute/src/app.ts");
      const { serveOnGrpcJs } = await import("../peers/grpc-js-server.ts");
      const peer = await serveOnGrpcJs(ComputeService, computeServiceImpl(app.domain), {
        host: config.host,
        tls: internalTls,
        callers: COMPUTE_CALLERS,
      });
      closePeer = peer.close;
      url = peer.url;
    } else url = (await app.server.listen()).url;
    closeService = async () => {
      await closePeer();
      await app.close();
      // The driver leaves sandboxes running across restarts by design; a
      // bench run must leave nothing behind, whatever failed on the way.
      removeCgroupTree(prefix);
    };
    extra = (msg) =>
      msg.type === "cgroup" ? cgroupMemory(prefix) : msg.type === "running" ? runningSandboxes(prefix) : undefined;
    onTerminate = () => removeCgroupTree(prefix);
    return { grpc: url };
  }
  if (kind === "agents") {
    const { createAgentsServer, loadConfig, providersFrom } = await import("@platform/agents");
    const config = loadConfig(process.env);
    const providers = providersFrom(config).register("bench", new BenchModel());
    const server = await createAgentsServer(config, logger, {
      providers,
      internalTls: (await import("@platform/rpc")).internalTlsFromEnv(process.env, "agents"),
    });
    const { url, grpcUrl } = await server.listen();
    closeService = () => server.close();
    // The session-log figure writes long logs straight into the service's own database (PGlite too).
    extra = (msg) => (msg.type === "seedLog" ? seedLog(server.database, msg) : undefined);
    return { url, grpc: grpcUrl };
  }
  if (kind === "bare-grpc") {
    // The floor of identity's gRPC latency figures: a bare node:http2 server with identity's TLS (peers/bare-grpc.ts).
    const { startBareGrpc } = await import("../peers/bare-grpc.ts");
    const tls = (await import("@platform/rpc")).internalTlsFromEnv(process.env, "identity");
    if (!tls) throw new Error("bare-grpc needs TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE");
    const server = await startBareGrpc(process.env.HOST ?? "127.0.0.1", tls);
    closeService = () => server.close();
    return { grpc: server.url };
  }
  if (kind === "bare-exec") {
    // The floor of the exec throughput figure: a bare node:http2 server with compute's TLS (peers/bare-exec.ts).
    const { startBareExec } = await import("../peers/bare-exec.ts");
    const tls = (await import("@platform/rpc")).internalTlsFromEnv(process.env, "compute");
    if (!tls) throw new Error("bare-exec needs TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE");
    const server = await startBareExec(process.env.HOST ?? "127.0.0.1", tls);
    closeService = () => server.close();
    return { grpc: server.url };
  }
  if (kind === "bare-login") {
    // The floor of the login figure: a bare node:http login server (peers/bare-login.ts).
    const { startBareLogin } = await import("../peers/bare-login.ts");
    const account = { email: process.env.BENCH_LOGIN_EMAIL ?? "", password: process.env.BENCH_LOGIN_PASSWORD ?? "" };
    const server = await startBareLogin(process.env.HOST ?? "127.0.0.1", account, process.env.DATABASE_URL);
    closeService = () => server.close();
    return { url: server.url };
  }
  if (kind === "bare-token-source" || kind === "bare-token-relay") {
    // The per-token figure's hops floor: agents' and the tenant worker's stand-ins (peers/bare-token-chain.ts).
    const { startTokenSource, startTokenRelay } = await import("../peers/bare-token-chain.ts");
    const tls = (await import("@platform/rpc")).internalTlsFromEnv(process.env);
    if (!tls) throw new Error(`${kind} needs TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE`);
    const host = process.env.HOST ?? "127.0.0.1";
    const server =
      kind === "bare-token-source"
        ? await startTokenSource(host, tls, process.env.DATABASE_URL)
        : await startTokenRelay(host, tls, process.env.BENCH_UPSTREAM ?? "");
    closeService = () => server.close();
    return { grpc: server.url };
  }
  if (kind === "bare-sse") {
    // The peer of agents' SSE streams: a bare node:http server (peers/bare-sse.ts).
    const { startBareSse } = await import("../peers/bare-sse.ts");
    const server = await startBareSse(process.env.HOST ?? "127.0.0.1");
    closeService = () => server.close();
    extra = (msg) => (msg.type === "open" ? server.open() : undefined);
    return { url: server.url };
  }
  throw new Error(`unknown service ${kind}`);
}

/**
 * Appends `count` events (`bytes` of text each) to a session's log in one
 * statement, as a long conversation would have written them, then ANALYZE.
 */
async function seedLog(database: { exec(sql: string): Promise<void> }, msg: Msg): Promise<void> {
  const sessionId = String(msg.sessionId);
  const count = Number(msg.count);
  const bytes = Number(msg.bytes ?? 100);
  if (!/^[0-9a-f-]{36}$/.test(sessionId) || !Number.isSafeInteger(count) || !Number.isSafeInteger(bytes))
    throw new Error("seedLog: sessionId, count, bytes");
  await database.exec(`
    insert into session_events (session_id, seq, type, content)
      select '${sessionId}', s.last_seq + g, case when g % 50 = 1 then 'user' else 'text' end, repeat('x', ${bytes})
      from sessions s, generate_series(1, ${count}) g where s.id = '${sessionId}';
    update sessions set last_seq = last_seq + ${count} where id = '${sessionId}';
    analyze session_events;`);
}

function ownCgroups(): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of fs.readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, controllers, path] = line.split(":");
    if (controllers !== undefined && path !== undefined) for (const c of controllers.split(",")) own.set(c, path);
  }
  return own;
}

/** How many sandbox cgroups under the bench's prefix hold processes (a released paused sandbox holds none). */
function runningSandboxes(prefix: string): number {
  const root = join("/sys/fs/cgroup/pids", ownCgroups().get("pids") ?? "/", prefix);
  if (!fs.existsSync(root)) return 0;
  let running = 0;
  for (const e of fs.readdirSync(root, { withFileTypes: true })) {
    // Warm sandboxes (".warm-<uuid>") are no one's.
    if (!e.isDirectory() || e.name.startsWith(".")) continue;
    const procs = fs.readFileSync(join(root, e.name, "cgroup.procs"), "utf8").trim();
    // The exec cgroups below a sandbox's count too (cgroup.procs is this level only).
    const below = fs
      .readdirSync(join(root, e.name), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .some((d) => fs.readFileSync(join(root, e.name, d.name, "cgroup.procs"), "utf8").trim() !== "");
    if (procs !== "" || below) running++;
  }
  return running;
}

/** Kills every process left in the bench's cgroup subtree and removes it. */
function removeCgroupTree(prefix: string): void {
  const own = ownCgroups();
  const roots = [join("/sys/fs/cgroup", prefix)];
  for (const entry of fs.readdirSync("/sys/fs/cgroup", { withFileTypes: true })) {
    if (entry.isDirectory()) roots.push(join("/sys/fs/cgroup", entry.name, own.get(entry.name) ?? "/", prefix));
  }
  const walk = (dir: string, visit: (d: string) => void) => {
    if (!fs.existsSync(dir)) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name), visit);
    visit(dir);
  };
  for (const root of roots) {
    walk(root, (d) => {
      try {
        for (const pid of fs.readFileSync(join(d, "cgroup.procs"), "utf8").split("\n").filter(Boolean))
          process.kill(Number(pid), "SIGKILL");
      } catch {
        // gone already
      }
    });
  }
  for (let attempt = 0; attempt < 20; attempt++) {
    let left = 0;
    for (const root of roots) {
      walk(root, (d) => {
        try {
          fs.rmdirSync(d);
        } catch {
          left++;
        }
      });
    }
    if (left === 0) return;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
}

/** The sandboxes' memory as the kernel counts it (v1 memory controller, or v2). */
function cgroupMemory(prefix: string): { usageBytes: number; rssBytes: number; path: string } | undefined {
  const own = ownCgroups();
  const candidates = [join("/sys/fs/cgroup/memory", own.get("memory") ?? "/", prefix), join("/sys/fs/cgroup", prefix)];
  for (const dir of candidates) {
    const v1 = join(dir, "memory.usage_in_bytes");
    const v2 = join(dir, "memory.current");
    if (fs.existsSync(v1)) {
      const stat = fs.readFileSync(join(dir, "memory.stat"), "utf8");
      const rss = Number(/^total_rss (\d+)/m.exec(stat)?.[1] ?? Number.NaN);
      return { usageBytes: Number(fs.readFileSync(v1, "utf8")), rssBytes: rss, path: dir };
    }
    if (fs.existsSync(v2)) {
      const stat = fs.readFileSync(join(dir, "memory.stat"), "utf8");
      const anon = Number(/^anon (\d+)/m.exec(stat)?.[1] ?? Number.NaN);
      return { usageBytes: Number(fs.readFileSync(v2, "utf8")), rssBytes: anon, path: dir };
    }
  }
  return undefined;
}

/** A full GC (--expose-gc); `compact`: one that leaves no fragmented page in the old space (compact-gc.ts). */
function collect(compact: boolean): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return;
  if (compact) compactingGc(gc);
  else gc();
}

function stats() {
  const m = process.memoryUsage();
  const s = {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    lagP50Ms: lag.percentile(50) / 1e6,
    lagP99Ms: lag.percentile(99) / 1e6,
    lagMaxMs: lag.max / 1e6,
    gc: { ...gc },
    cpu: process.cpuUsage(),
  };
  return s;
}

process.on("message", (raw) => {
  const msg = raw as Msg;
  void (async () => {
    try {
      let result: unknown;
      if (msg.type === "stats") result = stats();
      else if (msg.type === "resetLag") {
        lag.reset();
        lag.enable();
        Object.assign(gc, { count: 0, totalMs: 0, maxMs: 0 });
      } else if (msg.type === "lagOff") lag.disable();
      else if (msg.type === "gc") collect(msg.compact === true);
      else if (msg.type === "close") {
        await closeService();
        result = true;
      } else result = await extra(msg);
      process.send?.({ id: msg.id, result });
      // Exiting by itself (not by signal) lets --cpu-prof write its profile.
      if (msg.type === "close") setTimeout(() => process.exit(0), 50);
    } catch (err) {
      process.send?.({ id: msg.id, error: String(err) });
    }
  })();
});

// The runner went away (killed, crashed): clean up and go too.
process.on("disconnect", () => {
  setTimeout(() => process.exit(0), 10_000).unref();
  closeService().finally(() => process.exit(0));
});

start().then(
  (urls) => process.send?.({ type: "ready", urls }),
  (err) => {
    process.send?.({ type: "failed", error: String(err?.stack ?? err) });
    process.exit(1);
  },
);
