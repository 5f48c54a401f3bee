import { PlatformError } from "@platform/errors";
import { isTerminal, type SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import type { EventHub } from "./hub.ts";

export type FollowOptions = {
  /** How often a follower re-reads the log when nothing arrived in-process (runs on other replicas). */
  pollMs: number;
  signal?: AbortSignal;
  /** Follow this run (the one a send just started) instead of whichever is active now. */
  runId?: string;
};

/**
 * A session's events after `after`: the stored ones, then live ones until
 * the terminal event of the session's active run. With no active run it
 * replays and closes. The log is the source of truth: in-process
 * notifications only carry events already stored, and any gap is read back
 * from the database, so a follower never skips or repeats a seq.
 */
export async function* followEvents(
  store: Store,
  hub: EventHub,
  orgId: string,
  sessionId: string,
  after: number,
  options: FollowOptions,
): AsyncGenerator<SessionEvent> {
  const inbox: SessionEvent[] = [];
  // Set when the log changed in a way only the database can tell.
  let dirty = false;
  let wake: (() => void) | undefined;
  const unsubscribe = hub.subscribe(sessionId, (event) => {
    if (event) inbox.push(event);
    else dirty = true;
    wake?.();
  });
  try {
    const session = await store.getSession(orgId, sessionId);
    if (!session) throw PlatformError.notFound("session not found");
    const runId = options.runId ?? session.activeRunId;
    let last = after;
    for (const event of await store.listEvents(orgId, sessionId, last)) {
      yield event;
      last = event.seq;
      if (runId && event.runId === runId && isTerminal(event)) return;
    }
    if (!runId) return;
    while (true) {
      let fresh: SessionEvent[] | undefined;
      const queued = inbox.splice(0).filter((e) => e.seq > last);
      if (!dirty && queued.length > 0 && queued.every((e, i) => e.seq === last + 1 + i)) {
        fresh = queued;
      } else if (!dirty && queued.length === 0) {
        const timedOut = await waitFor(options.pollMs, options.signal, (resolve) => {
          wake = resolve;
        });
        wake = undefined;
        if (options.signal?.aborted) return;
        if (!timedOut) continue;
      }
      if (!fresh) {
        // A gap, a notification or a quiet spell: the log decides.
        dirty = false;
        fresh = await store.listEvents(orgId, sessionId, last);
        if (fresh.length === 0) {
          // A run that vanished without a terminal event (its replica died
          // and the lease lapsed) must not hold followers forever.
          const now = await store.getSession(orgId, sessionId);
          if (!now || now.activeRunId !== runId) return;
          continue;
        }
      }
      for (const event of fresh) {
        yield event;
        last = event.seq;
        if (isTerminal(event) && (event.runId === runId || event.runId === undefined)) return;
      }
    }
  } finally {
    unsubscribe();
  }
}

/** Resolves true after `ms`, or false when woken or aborted first. */
function waitFor(ms: number, signal: AbortSignal | undefined, arm: (wake: () => void) => void): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => finish(true), ms);
    const onAbort = () => finish(false);
    function finish(timedOut: boolean) {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(timedOut);
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    arm(() => finish(false));
  });
}
