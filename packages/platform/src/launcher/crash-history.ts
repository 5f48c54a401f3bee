import type { RestartPolicy } from "./config.ts";

/** What to do about one crash: restart after `delayMs`, or give up. */
export type CrashVerdict = { giveUp: boolean; delayMs: number; inWindow: number; streak: number };

/**
 * One service's crashes, for the restart policy: the streak (crashes since it
 * last ran healthy) sets the backoff, the crashes within the window decide
 * when to give up. A service that crashes every few minutes but runs fine in
 * between still gives up once the window holds maxCrashes of them.
 */
export class CrashHistory {
  #times: number[] = [];
  #streak = 0;

  constructor(private readonly policy: RestartPolicy) {}

  crashed(now = Date.now()): CrashVerdict {
    this.#times = this.#times.filter((t) => now - t < this.policy.windowMs);
    this.#times.push(now);
    this.#streak += 1;
    const delayMs = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** (this.#streak - 1));
    return {
      giveUp: this.#times.length >= this.policy.maxCrashes,
      delayMs,
      inWindow: this.#times.length,
      streak: this.#streak,
    };
  }

  /** The service has answered for healthyAfterMs since its last start: the next crash waits the initial delay again. */
  healthy(): void {
    this.#streak = 0;
  }

  get streak(): number {
    return this.#streak;
  }
}
