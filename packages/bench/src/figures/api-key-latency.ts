import { randomUUID } from "node:crypto";
import { loadavg } from "node:os";
import type { Figure } from "../figure.ts";
import { LoadProcess } from "../load/load-process.ts";
import { lat, summarize } from "../stats.ts";

/**
 * VerifyAPIKey over gRPC at a fixed offered rate (open loop): latency is
 * measured from each request's scheduled time, so a stall is not hidden by
 * the client waiting (no coordinated omission). The baseline is the floor:
 * the same client and offer against a bare node:http2 server with the same
 * TLS (peers/bare-grpc.ts), half before and half after ours, so a tail that
 * any server would get on this machine at that moment is told apart from
 * one identity adds.
 */
export const apiKeyLatency: Figure = {
  id: "api-key-latency",
  title: "API key verify latency at 1,000 requests/s",
  goal: "p99 ≤ 2 ms",
  async run(stack, size) {
    const identity = await stack.identity();
    const { access_token } = await stack.login();
    const res = await fetch(`${identity.urls.rest}/v1/users/me/api_keys`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${access_token}`,
        "content-type": "application/json",
        "idempotency-key": randomUUID(),
      },
      body: JSON.stringify({ name: `bench-${randomUUID()}`, env: "live" }),
    });
    if (res.status !== 201) throw new Error(`creating an API key: ${res.status} ${await res.text()}`);
    const { raw_key: apiKey } = (await res.json()) as { raw_key: string };
    const { ca, cert, key } = await stack.tls("agents");
    const floorServer = await stack.bareGrpc();
    // The client in a process of its own (load/load-child.ts), one HTTP/2 connection to each server.
    const load = LoadProcess.start();
    await load.connect("ours", identity.urls.grpc!, { ca, cert, key });
    await load.connect("floor", floorServer.urls.grpc!, { ca, cert, key });
    const seconds = size === "quick" ? 0.1 : 15;
    const loadBefore = loadavg()[0]!;
    try {
      await load.verifyAPIKey("ours", apiKey, 200);
      await load.verifyAPIKey("floor", apiKey, 200);

      const floorBefore = await load.openLoop("floor", apiKey, 1000, seconds / 2);
      await identity.request("resetLag");
      const full = await load.openLoop("ours", apiKey, 1000, seconds);
      const stats = await identity.stats();
      const floorAfter = await load.openLoop("floor", apiKey, 1000, seconds / 2);
      // Context for a miss: the same calls at a rate one identity process does sustain here.
      const light = await load.openLoop("ours", apiKey, 100, size === "quick" ? 0.1 : 5);
      const loadAfter = loadavg()[0]!;
      const m = summarize(full.samples);
      const l = summarize(light.samples);
      const f = summarize([...floorBefore.samples, ...floorAfter.samples]);
      const floorFailures = floorBefore.failures + floorAfter.failures;
      const floorGaveUp = floorBefore.gaveUp || floorAfter.gaveUp;
      return {
        baseline: `bare node:http2 server (same TLS, client and offer; half before, half after ours): ${lat(f)}`,
        measured: lat(m),
        ratio: `p99 ${(m.p99 / f.p99).toFixed(2)}× the floor's`,
        met: m.p99 <= 2 && full.failures === 0 && !full.gaveUp,
        notes: `${full.gaveUp ? `The service could not sustain the rate: the offer stopped after ${full.sent} calls with over 1,000 outstanding (it completed ${full.completedPerSecond.toFixed(0)}/s). ` : ""}${full.sent} of ${full.total} VerifyAPIKey calls offered at 1,000/s over ${full.wall.toFixed(1)} s (open loop, latency from the scheduled send time, one HTTP/2 connection from the bench's lean load client (raw node:http2 + protobuf, grpc-status checked and the response decoded; not connect-node) in a process of its own, server in its own process; its event-loop lag p99 ${stats.lagP99Ms.toFixed(2)} ms, max ${stats.lagMaxMs.toFixed(1)} ms; ${stats.gc.count} GC pauses, ${stats.gc.totalMs.toFixed(0)} ms in all, the longest ${stats.gc.maxMs.toFixed(1)} ms), ${full.failures} failures; p90 ${m.p90.toFixed(2)} ms, max ${m.max.toFixed(1)} ms. The floor (a server that answers a fixed message: what the transport, the client and this machine's scheduling allow any server at that moment): p90 ${f.p90.toFixed(2)} ms, max ${f.max.toFixed(1)} ms, ${floorFailures} failures${floorGaveUp ? ", the offer given up" : ""}. Same calls offered at 100/s: ${lat(l)}. Load average (1 min) ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after.`,
        raw: {
          latency: m,
          floor: f,
          at100: l,
          failures: full.failures,
          gaveUp: full.gaveUp,
          gc: stats.gc,
          load: [loadBefore, loadAfter],
        },
      };
    } finally {
      await load.close();
      await floorServer.stop();
    }
  },
};
