import { ConnectError } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import type { SessionEvent as SessionEventMessage } from "@platform/gen/agents/v1/agents_pb";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { CLIENT_ERROR_DOMAIN, ClientReason, toPlatformError } from "./errors.ts";
import { type ChatEvent, isTerminal, toChatEvent } from "./events.ts";

/** How a broken event stream is rejoined. */
export interface ResumeOptions {
  /** Reconnections in a row without a new event before giving up (5). */
  attempts?: number;
  /** Wait before the first reconnection, doubled for each next one, at most 5 s (250 ms). */
  delayMs?: number;
}

/** The calls one followed stream needs. */
export interface FollowPlan {
  /** The first connection; `onHeader` once its 200 arrived (the server took the request). */
  open(signal: AbortSignal, onHeader: () => void): AsyncIterable<SessionEventMessage>;
  /** A reconnection: the events after `after` (sent as Last-Event-ID). */
  rejoin(after: number, signal: AbortSignal): AsyncIterable<SessionEventMessage>;
  /** The seq to rejoin after when the first connection broke before its first event. */
  start?(): Promise<number>;
  /** The seq already seen, when known before the first connection. */
  after?: number;
}

/**
 * The run's events, each exactly once, as a typed async iterator ending
 * after the terminal `done` or `error`. When the connection drops before
 * then (a read fails, or the stream ends early) it rejoins the session's
 * stream with `Last-Event-ID` set to the last seq received and goes on; a
 * seq already yielded is never yielded again. A first request that never got
 * its answer is not sent again (the message may or may not have been taken):
 * that is an UNAVAILABLE `unreachable` error, as is a stream that could not
 * be rejoined (`stream_interrupted`). Breaking out of the loop, or the
 * caller's signal, closes the connection.
 */
export async function* follow(
  plan: FollowPlan,
  options: ResumeOptions = {},
  signal?: AbortSignal,
): AsyncGenerator<ChatEvent> {
  const maxAttempts = options.attempts ?? 5;
  const delayMs = options.delayMs ?? 250;
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener("abort", onAbort, { once: true });
  let last = plan.after;
  let accepted = false;
  let failures = 0;
  try {
    let stream = plan.open(controller.signal, () => (accepted = true));
    let rejoining = false;
    for (;;) {
      let received = 0;
      let failure: unknown;
      try {
        for await (const m of stream) {
          const event = toChatEvent(m);
          if (last !== undefined && event.seq <= last) continue;
          last = event.seq;
          received++;
          failures = 0;
          yield event;
          if (isTerminal(event)) return;
        }
      } catch (err) {
        if (controller.signal.aborted) throw toPlatformError(controller.signal.reason ?? err);
        if (!accepted || !retryable(err)) throw toPlatformError(err);
        failure = err;
      }
      // The server closes a rejoined stream when the run has no more to send.
      if (failure === undefined && rejoining && received === 0) return;
      if (++failures > maxAttempts)
        throw new PlatformError(
          Code.Unavailable,
          ClientReason.streamInterrupted,
          `the event stream broke and ${maxAttempts} reconnections failed`,
          {},
          { cause: failure },
        );
      await sleep(Math.min(delayMs * 2 ** (failures - 1), 5_000), controller.signal);
      if (last === undefined) last = plan.start ? await plan.start() : 0;
      stream = plan.rejoin(last, controller.signal);
      rejoining = true;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    controller.abort();
  }
}

/** A broken connection or a service that said "try again": worth rejoining (a GET, safe to repeat). */
function retryable(err: unknown): boolean {
  const e = err instanceof PlatformError ? err.cause : err;
  if (!(e instanceof ConnectError)) return false;
  const info = e.findDetails(ErrorInfoSchema)[0];
  if (info?.domain === CLIENT_ERROR_DOMAIN)
    return info.reason === ClientReason.unreachable || info.reason === ClientReason.streamInterrupted;
  return e.code === (Code.Unavailable as number);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(toPlatformError(signal.reason));
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(toPlatformError(signal.reason));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
