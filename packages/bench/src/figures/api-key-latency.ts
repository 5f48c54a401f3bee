import { randomUUID } from "node:crypto";
import type { Figure } from "../figure.ts";
import { authClient } from "../identity-client.ts";
import { lat, summarize } from "../stats.ts";

/**
 * VerifyAPIKey over gRPC at a fixed offered rate (open loop): latency is
 * measured from each request's scheduled time, so a stall is not hidden by
 * the client waiting (no coordinated omission).
 */
export const apiKeyLatency: Figure = {
  id: "api-key-latency",
  title: "API key verify latency at 1,000 requests/s",
  goal: "p99 ≤ 1 ms",
  async run(stack, size) {
    const identity = await stack.identity();
    const { access_token } = await stack.login();
    const res = await fetch(`${identity.urls.rest}/v1/users/me/api_keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${access_token}`, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: JSON.stringify({ name: `bench-${randomUUID()}`, env: "live" }),
    });
    if (res.status !== 201) throw new Error(`creating an API key: ${res.status} ${await res.text()}`);
    const { raw_key: apiKey } = (await res.json()) as { raw_key: string };
    const client = authClient(identity.urls.grpc!);
    for (let i = 0; i < 200; i++) await client.verifyAPIKey({ apiKey });

    const rate = 1000;
    const seconds = size === "quick" ? 0.1 : 15;
    const total = Math.round(rate * seconds);
    const samples: number[] = [];
    let failures = 0;
    const inflight: Promise<void>[] = [];
    await identity.request("resetLag");
    const start = process.hrtime.bigint();
    let sent = 0;
    let done = 0;
    // Over a second of backlog means the service cannot keep up with the
    // offered rate: stop offering rather than queue for minutes.
    const maxBacklog = rate;
    let gaveUp = false;
    while (sent < total) {
      if (sent - done > maxBacklog) {
        gaveUp = true;
        break;
      }
      const elapsed = Number(process.hrtime.bigint() - start);
      const due = Math.min(total, Math.floor((elapsed / 1e9) * rate) + 1);
      for (; sent < due; sent++) {
        const scheduled = start + BigInt(Math.round((sent / rate) * 1e9));
        inflight.push(
          client.verifyAPIKey({ apiKey }).then(
            () => {
              done++;
              samples.push(Number(process.hrtime.bigint() - scheduled));
            },
            () => {
              done++;
              failures++;
            },
          ),
        );
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(inflight);
    const wall = Number(process.hrtime.bigint() - start) / 1e9;
    const m = summarize(samples);
    const stats = await identity.stats();
    return {
      baseline: "—",
      measured: lat(m),
      ratio: "—",
      met: m.p99 <= 1 && failures === 0 && !gaveUp,
      notes: `${gaveUp ? `The service could not sustain the rate: the offer stopped after ${sent} calls with over ${maxBacklog} outstanding (it completed ${(done / wall).toFixed(0)}/s). ` : ""}${sent} of ${total} VerifyAPIKey calls offered at ${rate}/s over ${wall.toFixed(1)} s (open loop, latency from the scheduled send time, client and server on loopback, server in its own process; its event-loop lag p99 ${stats.lagP99Ms.toFixed(2)} ms), ${failures} failures; p90 ${m.p90.toFixed(2)} ms, max ${m.max.toFixed(1)} ms.`,
      raw: { latency: m, failures },
    };
  },
};
