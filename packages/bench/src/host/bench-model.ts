import type { ModelEvent, ModelProvider, ModelRequest } from "@platform/agents";

/**
 * `bench/...` models served by the agents process under test:
 * - `bench/paced-<count>-<intervalUs>`: `count` text tokens, one every
 *   `intervalUs`, each carrying its emission time (`process.hrtime` ns,
 *   CLOCK_MONOTONIC, so comparable across processes on one host) as
 *   `<ns>;` so a client can compute per-token latency from the text alone.
 * - `bench/idle`: one text token, then nothing until the run is aborted
 *   (a stream held open and idle).
 */
export class BenchModel implements ModelProvider {
  async start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    return request.model === "idle" ? idle(signal) : paced(request.model, signal);
  }
}

async function* paced(model: string, signal: AbortSignal): AsyncGenerator<ModelEvent> {
  const m = /^paced-(\d+)-(\d+)$/.exec(model);
  const count = m ? Number(m[1]) : 20;
  const intervalUs = m ? Number(m[2]) : 2000;
  yield { type: "usage", inputTokens: 1, outputTokens: 0 };
  for (let i = 0; i < count && !signal.aborted; i++) {
    // A timer only, never a spin: a busy wait would take a core from the
    // process under test, as a provider's stream (socket reads) does not.
    // Late timers only space tokens further apart: each carries its own stamp.
    await new Promise((r) => setTimeout(r, intervalUs / 1000));
    yield { type: "text", text: `${process.hrtime.bigint()};` };
  }
  yield { type: "usage", inputTokens: 1, outputTokens: count };
  yield { type: "stop", reason: "end_turn" };
}

async function* idle(signal: AbortSignal): AsyncGenerator<ModelEvent> {
  yield { type: "text", text: "open;" };
  await new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  yield { type: "stop", reason: "end_turn" };
}

/** Emission times (ns) embedded in a stream's text. */
export function stampsOf(text: string): bigint[] {
  return text
    .split(";")
    .filter((s) => /^\d+$/.test(s))
    .map((s) => BigInt(s));
}
