import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Polls `check` until it holds, failing the test with `what` after `ms`.
 * For what the driver does on its own time (a launcher exiting, a cgroup
 * emptied, a loop device detached): no event says when.
 */
export async function until(what: string, check: () => boolean, ms = 30_000, everyMs = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) assert.fail(`timed out waiting for: ${what}`);
    await sleep(everyMs);
  }
}
