import { Code, PlatformError } from "@platform/errors";
import { isNotFound, isTransient } from "../orchestrator/orchestrator.ts";

export type Sleep = (ms: number) => Promise<void>;
export const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The spec's EnsureReady backoff. */
export const ENSURE_BACKOFF_MS = [100, 200, 400, 800, 1600] as const;

/**
 * Runs `attempt`, retrying transient orchestrator errors after each delay in
 * turn. The spec lists five delays and "DEADLINE_EXCEEDED after 5 failed
 * attempts": we read that as five retries, each after one of the listed
 * delays, so the sequence is try, 100, try, 200, try, 400, try, 800, try,
 * 1600, try, then DEADLINE_EXCEEDED (every listed delay is used once).
 * `not_found` counts as transient here: a deployment deleted between our read
 * and write is simply looked up again. Other errors pass through.
 */
export async function withBackoff<T>(
  attempt: () => Promise<T>,
  sleep: Sleep,
  delays: readonly number[] = ENSURE_BACKOFF_MS,
  onRetry?: (err: unknown, delayMs: number) => void,
): Promise<T> {
  let last: unknown;
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (!isTransient(err) && !isNotFound(err)) throw err;
      last = err;
      const delay = delays[i];
      if (delay === undefined) break;
      onRetry?.(err, delay);
      await sleep(delay);
    }
  }
  throw new PlatformError(
    Code.DeadlineExceeded,
    "deadline_exceeded",
    `orchestrator unavailable after ${delays.length} retries`,
    {},
    { cause: last },
  );
}
