import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
// The launcher's bundler, reached by path as host/service-process.ts reaches it.
import { BUNDLE_CACHE, ensureBundles } from "../../../platform/src/launcher/bundles.ts";
import type { Figure } from "../figure.ts";
import { HttpLoadClient } from "../http-load-client.ts";
import { ratio } from "../loop.ts";
import { keepAliveAgent } from "../socket-reuse.ts";
import { readSse } from "../sse-client.ts";
import { fmtMs, summarize } from "../stats.ts";

const PROBE = fileURLToPath(new URL("../livez-probe.ts", import.meta.url));
const PROBE_INTERVAL_MS = 20;
/** Beside the other caches, not in one (ensureBundles removes from its directory the builds it did not make). */
const PROBE_BUNDLE_CACHE = join(dirname(BUNDLE_CACHE), "platform-bench-probe-bundles");

let probeBundle: Promise<string> | undefined;

/**
 * livez-probe.ts as a bundle on plain Node, built as the services' are and
 * cached until a source changes: under tsx each probe process first spent
 * ~0.6 s of CPU on a loader thread and transpiling, beside the load it times.
 */
function probeModule(): Promise<string> {
  probeBundle ??= ensureBundles({ "livez-probe": PROBE }, PROBE_BUNDLE_CACHE).then(
    ({ paths }) => paths["livez-probe"]!,
  );
  return probeBundle;
}

type Probed = { samples: number[]; failures: number; errors: string[] };

/** Probes GET /livez of each base URL from a process of its own for `durationMs`; latencies in ms. */
async function probeLivez(durationMs: number, ...bases: string[]): Promise<Probed[]> {
  const probe = await probeModule();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [probe, String(durationMs), String(PROBE_INTERVAL_MS), ...bases], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`livez probe exited with ${code}`));
      resolve(JSON.parse(out) as Probed[]);
    });
  });
}

/**
 * A bare Node HTTP server answering /livez, in a process of its own: what
 * the machine's contention alone does to a probe during the same window.
 */
async function startBareServer(): Promise<{ url: string; stop: () => void }> {
  // It ends with its stdin, so it never outlives the bench (a figure past its ceiling is abandoned, not awaited).
  const code = `require("node:http").createServer((q, s) => s.end('{"status":"ok"}')).listen(0, "127.0.0.1", function () { console.log(this.address().port); }); process.stdin.on("end", () => process.exit(0)).resume();`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()));
    child.once("exit", (c) => reject(new Error(`bare server exited with ${c}`)));
  });
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

/**
 * The agents service's liveness under mixed traffic at saturation: each
 * lane creates sessions, sends messages the dev model streams back (long
 * echoes), has it run a bash tool call in the session's real compute
 * sandbox, reads whole event logs (its own session's or one of a few long
 * conversations of thousands of events), replays them over SSE and follows
 * a live run from a second connection. /livez is probed on a fixed schedule
 * from a process of its own, first with the service idle (the baseline),
 * then under the load; the agents process's own event-loop delay is read
 * over IPC for the same windows.
 */
export const agentsLivezLoad: Figure = {
  id: "agents-livez-load",
  title: "agents /livez p99 under mixed load (sessions, streamed replies, tool calls, log reads, SSE follows)",
  goal: "p99 ≤ 100 ms",
  // 60 s of load, the long conversations written before it, the idle probe.
  fullTimeoutMs: 300_000,
  async run(stack, size) {
    const agents = await stack.agents();
    const { access_token: token } = await stack.login();
    const base = agents.urls.url!;
    const lanes = size === "quick" ? 4 : 48;
    const loadMs = size === "quick" ? 3000 : 60_000;
    const idleMs = size === "quick" ? 1000 : 5000;
    const auth = { authorization: `Bearer ${token}` };
    const client = new HttpLoadClient(base, lanes * 2);
    const streams = keepAliveAgent(lanes * 2);
    const slug = `load-${Date.now().toString(36)}`;
    const created = await client.postJson("/v1/agents", { name: slug, slug, model: "dev/echo" }, auth);
    if (created.status !== 201) throw new Error(`create agent: ${created.status} ${created.text}`);
    const agentId = (JSON.parse(created.text) as { id: string }).id;

    const bare = await startBareServer();
    try {
      // The service idle, probed like under the load.
      await agents.request("resetLag");
      const [idle] = await probeLivez(idleMs, base);
      const idleLag = await agents.stats();

      const counts = { sessions: 0, messages: 0, toolCalls: 0, logReads: 0, replays: 0, follows: 0, errors: 0 };
      let firstError: string | undefined;
      // Every distinct error (its first 160 characters) and how often: one line in the notes each.
      const errorKinds = new Map<string, number>();
      const fail = (what: string) => {
        counts.errors++;
        firstError ??= what;
        const kind = what.slice(0, 160);
        errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
      };
      const echo = "the quick brown fox jumps over the lazy dog ".repeat(40);

      const newSession = async (): Promise<string | undefined> => {
        const r = await client.postJson("/v1/sessions", { agentId }, auth);
        if (r.status !== 201) return void fail(`create session: ${r.status} ${r.text.slice(0, 200)}`);
        counts.sessions++;
        return (JSON.parse(r.text) as { id: string }).id;
      };
      const send = async (sessionId: string, content: string): Promise<boolean> => {
        const r = await readSse(
          "POST",
          `${base}/v1/sessions/${sessionId}/messages`,
          token,
          { messages: [{ role: "user", content }] },
          streams,
        );
        const last = r.events.at(-1);
        if (r.status !== 200 || !last?.data.includes('"done"')) {
          const tail = r.events.slice(-3).map((e) => `${e.event} ${e.data.slice(0, 60)}`);
          fail(`send: ${r.status}, ${r.events.length} events, the last: ${tail.join(" | ")}`);
          return false;
        }
        return true;
      };
      const lane = async (n: number) => {
        let sessionId: string | undefined;
        for (let i = 0; performance.now() < end; i++) {
          try {
            // A fresh session every 12 rounds: logs grow, and new sessions keep coming.
            if (i % 12 === 0 || !sessionId) sessionId = await newSession();
            if (!sessionId) continue;
            switch ((i + n) % 5) {
              case 0:
                if (await send(sessionId, echo)) counts.messages++;
                break;
              case 1:
                if (await send(sessionId, `run: echo lane ${n} round ${i}`)) counts.toolCalls++;
                break;
              case 2: {
                const target = i % 2 === 0 ? sessionId : long[(n + i) % long.length]!;
                const r = await client.request("GET", `/v1/sessions/${target}`, undefined, auth);
                if (r.status === 200) counts.logReads++;
                else fail(`get session: ${r.status} ${r.text.slice(0, 200)}`);
                break;
              }
              case 3: {
                const target = i % 2 === 0 ? sessionId : long[(n + i) % long.length]!;
                const r = await readSse(
                  "GET",
                  `${base}/v1/sessions/${target}/events?after=0`,
                  token,
                  undefined,
                  streams,
                );
                if (r.status === 200) counts.replays++;
                else fail(`replay: ${r.status}`);
                break;
              }
              case 4: {
                // A send and a follower of the same run from a second connection.
                const sending = send(sessionId, echo.slice(0, 400));
                const follow = readSse("GET", `${base}/v1/sessions/${sessionId}/events`, token, undefined, streams);
                const [ok, f] = await Promise.all([sending, follow]);
                if (ok) counts.messages++;
                if (f.status === 200) counts.follows++;
                else fail(`follow: ${f.status}`);
                break;
              }
            }
          } catch (err) {
            fail(String(err));
          }
        }
      };

      // Long conversations (a few thousand events each: the dev model streams a
      // long echo as fragments of 32 characters), read and replayed under the load.
      const long: string[] = [];
      for (let k = 0; k < (size === "quick" ? 1 : 4); k++) {
        const id = await newSession();
        if (!id) throw new Error(`could not create a session: ${firstError}`);
        for (let m = 0; m < (size === "quick" ? 1 : 3); m++)
          if (!(await send(id, "a long message to echo ".repeat(size === "quick" ? 100 : 2800))))
            throw new Error(`could not fill a long session: ${firstError}`);
        long.push(id);
      }
      const end = performance.now() + loadMs;

      await agents.request("resetLag");
      const cpu0 = (await agents.stats()).cpu;
      // The load generator's own stalls: a kept-alive socket it reuses after a stall longer than the
      // margin Node keeps under the server's keep-alive timeout (1 s) may have been closed meanwhile.
      const clientLag = monitorEventLoopDelay({ resolution: 10 });
      clientLag.enable();
      const t0 = performance.now();
      // Baseline: a bare server probed by the same process in the same window.
      const [[loaded, control]] = await Promise.all([
        probeLivez(loadMs, base, bare.url),
        Promise.all(Array.from({ length: lanes }, (_, n) => lane(n))),
      ]);
      const seconds = (performance.now() - t0) / 1000;
      clientLag.disable();
      const loadStats = await agents.stats();

      const i = summarize(idle!.samples.map((ms) => ms * 1e6));
      const l = summarize(loaded!.samples.map((ms) => ms * 1e6));
      const c = summarize(control!.samples.map((ms) => ms * 1e6));
      const cpuSeconds = (loadStats.cpu.user + loadStats.cpu.system - cpu0.user - cpu0.system) / 1e6;
      const ops =
        counts.sessions + counts.messages + counts.toolCalls + counts.logReads + counts.replays + counts.follows;
      return {
        baseline: `bare Node server, same window: /livez p50 ${fmtMs(c.p50)}, p99 ${fmtMs(c.p99)}`,
        measured: `/livez p50 ${fmtMs(l.p50)}, p99 ${fmtMs(l.p99)}, max ${fmtMs(l.max)} (n=${l.n}, ${loaded!.failures} failed)`,
        ratio: `p99 ${ratio(l.p99, c.p99)}`,
        met: l.p99 <= 100 && loaded!.failures === 0,
        notes: `${lanes} lanes for ${seconds.toFixed(0)} s on ${stack.databaseKind}: ${ops} operations (${JSON.stringify(counts)}${errorKinds.size > 0 ? `, errors: ${[...errorKinds].map(([k, n]) => `${n}× ${k}`).join("; ")}` : ""}); agents used ${((cpuSeconds / seconds) * 100).toFixed(0)} % of a core; its own event-loop delay p99 ${loadStats.lagP99Ms.toFixed(1)} ms, max ${loadStats.lagMaxMs.toFixed(0)} ms under load (idle: p99 ${idleLag.lagP99Ms.toFixed(1)} ms); agents idle before the load: /livez p50 ${fmtMs(i.p50)}, p99 ${fmtMs(i.p99)}. The load generator's event-loop delay p99 ${(clientLag.percentile(99) / 1e6).toFixed(0)} ms, max ${(clientLag.max / 1e6).toFixed(0)} ms. /livez probed every ${PROBE_INTERVAL_MS} ms on a fixed schedule from a process of its own.${loaded!.errors.length > 0 ? ` Failed probes: ${loaded!.errors.slice(0, 5).join("; ")}.` : ""}`,
        raw: {
          idle: i,
          loaded: l,
          control: c,
          counts,
          lagP99Ms: loadStats.lagP99Ms,
          lagMaxMs: loadStats.lagMaxMs,
          idleLagP99Ms: idleLag.lagP99Ms,
          cpuSeconds,
          seconds,
        },
      };
    } finally {
      bare.stop();
      client.close();
      streams.destroy();
    }
  },
};
