import { PlatformError } from "@platform/errors";
import type { ModelEvent, ModelProvider, ModelRequest } from "../providers/provider.ts";

export type Step = ModelEvent | { type: "wait"; until: Promise<unknown> } | { type: "throw"; message: string };
/** One model call: its steps, or `unreachable` to fail before the stream starts. */
export type Script = Step[] | "unreachable";

/**
 * A test model that plays scripted calls in order and records the requests
 * it got. `wait` steps hold the stream until a promise settles, so tests
 * control timing without sleeping.
 */
export class ScriptedModel implements ModelProvider {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly scripts: Script[] = []) {}

  push(...scripts: Script[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  async start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    this.requests.push(structuredClone(request));
    const script = this.scripts.shift() ?? [{ type: "text", text: "ok" }];
    if (script === "unreachable") throw PlatformError.unavailable("scripted model is unreachable");
    return play(script, signal);
  }
}

async function* play(steps: Step[], signal: AbortSignal): AsyncGenerator<ModelEvent> {
  for (const step of steps) {
    if (signal.aborted) throw signal.reason;
    if (step.type === "wait") {
      await Promise.race([
        step.until,
        new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true })),
      ]);
    } else if (step.type === "throw") {
      throw PlatformError.unavailable(step.message);
    } else {
      yield step;
    }
  }
}

/** A promise and the function that resolves it. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
