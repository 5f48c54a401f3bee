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

/**
 * How long a released workspace's loop device may stay attached after its
 * sandbox is gone: until another holder lets go. A sandbox launch anywhere
 * on the host (another test file's driver in a full run) copies the host's
 * mounts with its mount namespace and drops them a few ms later (launch.ts:
 * its `umount -l` of MOUNTS_ROOT); a workspace such a launch held as its
 * sandbox ended is detached (autoclear) when that launch lets go, 2-5 ms
 * later beside another driver's launches. One attached after this long was
 * never released.
 */
export const LOOP_SETTLE_MS = 5000;
