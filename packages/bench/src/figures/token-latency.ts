import { CommitFloor } from "../commit-floor.ts";
import { stampsOf, BenchModel } from "../host/bench-model.ts";
import type { Figure } from "../figure.ts";
import { postSse, readSse } from "../sse-client.ts";
import { lat, now, summarize, fmtMs } from "../stats.ts";

/**
 * Per-token latency through client → router → tenant worker → agents →
 * model and back: the agents process's `bench/paced` model stamps each token
 * with its emission time (CLOCK_MONOTONIC, shared by the processes of one
 * host); the client subtracts it from the token's arrival. Baseline: the same
 * model's stream read directly in this process. Floor (PostgreSQL only): a
 * durable one-row commit on agents' database, paced alike and interleaved,
 * since each text token is committed before it is published.
 */
export const tokenLatency: Figure = {
  id: "token-latency",
  title: "per-token latency added by router → worker → agents",
  goal: "p50 ≤ 1 ms, p99 ≤ 5 ms",
  async run(stack, size) {
    const { router } = await stack.router();
    const { access_token: token } = await stack.login();
    const tokens = size === "quick" ? 10 : 100;
    const intervalUs = 3000;
    const model = `paced-${tokens}-${intervalUs}`;
    const invokes = size === "quick" ? 1 : 15;
    const direct = new BenchModel();
    const chain: number[] = [];
    const base: number[] = [];
    const invoke = async () => {
      const sessionId = await stack.newSession(token, `bench/${model}`);
      const r = await postSse(`${router.url}/v1/sessions/${sessionId}/invoke`, token, {
        messages: [{ role: "user", content: "go" }],
      });
      if (r.status !== 200) throw new Error(`invoke: ${r.status} ${r.events.map((e) => e.data).join(" ")}`);
      const errors = r.events.filter((e) => e.event === "error");
      if (errors.length) throw new Error(`invoke stream error: ${errors[0]!.data}`);
      const out: number[] = [];
      for (const e of r.events) for (const stamp of stampsOf(e.data)) out.push(Number(e.at - stamp));
      return out;
    };
    // Warm-up: the tenant's worker starts on the first invoke.
    await invoke();
    await invoke();
    const url = stack.databaseUrls.agents;
    const floor = url ? await CommitFloor.open(url) : undefined;
    // The hops floor: the same path with bare servers (peers/bare-token-chain.ts), its source committing each token alike.
    const chainFloor = await stack.tokenChainFloor();
    const hops: number[] = [];
    const viaFloor = async () => {
      const r = await readSse("POST", `${chainFloor.url}/invoke`, token, {}, undefined, {
        "x-tokens": String(tokens),
        "x-interval-us": String(intervalUs),
      });
      const out: number[] = [];
      for (const e of r.events) for (const stamp of stampsOf(e.data)) out.push(Number(e.at - stamp));
      if (out.length !== tokens) throw new Error(`expected ${tokens} tokens through the hops floor, got ${out.length}`);
      return out;
    };
    try {
      await viaFloor();
      await floor?.round(10, intervalUs);
      floor?.samples.splice(0);
      for (let i = 0; i < invokes; i++) {
        const stream = await direct.start(
          { model, system: "", messages: [], tools: [], maxTokens: 1 },
          new AbortController().signal,
        );
        for await (const ev of stream)
          if (ev.type === "text") for (const s of stampsOf(ev.text)) base.push(Number(now() - s));
        const got = await invoke();
        if (got.length !== tokens) throw new Error(`expected ${tokens} tokens through the router, got ${got.length}`);
        chain.push(...got);
        await floor?.round(tokens, intervalUs);
        hops.push(...(await viaFloor()));
      }
    } finally {
      await floor?.close();
      await chainFloor.stop();
    }
    const c = summarize(chain);
    const b = summarize(base);
    const added = { p50: c.p50 - b.p50, p99: c.p99 - b.p99 };
    const f = floor ? summarize(floor.samples) : undefined;
    const h = summarize(hops);
    const hopsAdded = { p50: h.p50 - b.p50, p99: h.p99 - b.p99 };
    const floorNote = f
      ? ` Floor: a one-row commit on agents' PostgreSQL database from this process, ${tokens} paced ${intervalUs / 1000} ms apart after each invoke: ${lat(f)}; ${f.p50 > 1 || f.p99 > 5 ? "the floor alone misses the goal" : "the floor alone meets the goal"}; ours beyond it p50 ${fmtMs(added.p50 - f.p50)}, p99 ${fmtMs(added.p99 - f.p99)}.`
      : " No commit floor on PGlite.";
    const hopsNote = ` Hops floor: the same path with bare servers (an HTTP/2 source with agents' certificate${url ? " committing one row on agents' database per token" : ""}, a relay with the tenant worker's, each in its own process, an HTTP/1.1 SSE edge in this process with the router's, mutual TLS on both HTTP/2 hops; peers/bare-token-chain.ts), ${tokens} tokens paced alike after each invoke: added p50 ${fmtMs(hopsAdded.p50)}, p99 ${fmtMs(hopsAdded.p99)} (${lat(h)}); ${hopsAdded.p50 > 1 || hopsAdded.p99 > 5 ? "the hops floor alone misses the goal" : "the hops floor alone meets the goal"}; ours beyond it p50 ${fmtMs(added.p50 - hopsAdded.p50)}, p99 ${fmtMs(added.p99 - hopsAdded.p99)}.`;
    return {
      baseline: `model stream read directly: ${lat(b)}`,
      measured: `added p50 ${fmtMs(added.p50)}, p99 ${fmtMs(added.p99)} (end to end ${lat(c)})`,
      ratio: "—",
      met: added.p50 <= 1 && added.p99 <= 5,
      notes: `${invokes} invokes of ${tokens} tokens paced ${intervalUs / 1000} ms apart (so tokens do not queue behind each other), each on a fresh session, alternated with a direct read of the same model; router in the bench process with the local orchestrator, tenant worker in its own process, agents and identity in theirs; per-token latency = arrival at the client − emission stamp. "Added" = chain percentile − direct percentile. Each text token is committed to the session's log before it is published (so a Last-Event-ID always names a stored event).${floorNote}${hopsNote}`,
      raw: { chain: c, direct: b, hopsFloor: h, ...(f ? { commitFloor: f } : {}) },
    };
  },
};
