import type { Figure } from "../figure.ts";
import { ratio, repeat } from "../loop.ts";
import { postSse } from "../sse-client.ts";
import { lat, now, summarize } from "../stats.ts";

/** Invoke on a tenant scaled to zero (the local orchestrator starts a worker process) to the first SSE byte, against a warm invoke. */
export const coldStart: Figure = {
  id: "cold-start",
  title: "tenant cold start, zero → first byte (local orchestrator)",
  goal: "p50 ≤ 300 ms",
  async run(stack, size) {
    const { router, orchestrator } = await stack.router();
    const { access_token: token } = await stack.login();
    const sessionId = await stack.newSession(token, "dev/echo");
    const invoke = async () => {
      const t0 = now();
      const r = await postSse(`${router.url}/v1/sessions/${sessionId}/invoke`, token, {
        messages: [{ role: "user", content: "hi" }],
      });
      if (r.status !== 200 || !r.events.some((e) => e.event === "turn_done"))
        throw new Error(`invoke: ${r.status} ${JSON.stringify(r.events)}`);
      return Number(r.firstByteAt - t0);
    };
    await invoke();
    await invoke();
    const deployments = await orchestrator.listDeployments({ "runtime.platform.io/tenant": "true" });
    if (deployments.length !== 1) throw new Error(`expected one tenant deployment, found ${deployments.length}`);
    const name = deployments[0]!.name;
    const cold: number[] = [];
    const warm: number[] = [];
    const n = await repeat(
      { n: size === "quick" ? 1 : 12, budgetMs: size === "quick" ? 10_000 : 60_000, minN: 1 },
      async () => {
        await orchestrator.scaleDeployment(name, 0);
        cold.push(await invoke());
        warm.push(await invoke());
      },
    );
    const c = summarize(cold);
    const w = summarize(warm);
    return {
      baseline: `warm invoke: ${lat(w)}`,
      measured: lat(c),
      ratio: `p50 ${ratio(c.p50, w.p50)}`,
      met: c.p50 <= 300,
      notes: `${n} rounds: scale the tenant to 0 (its worker process stops), invoke (router wakes it: EnsureReady, the local orchestrator hands the deployment to its pre-started spare worker, or starts one from the prebuilt bundle when none is up, the worker binds and reports ready, gRPC health check, forward), then a warm invoke; time from request to the first byte of the SSE body, the dev model answering "echo: hi".`,
      raw: { cold: c, warm: w },
    };
  },
};
