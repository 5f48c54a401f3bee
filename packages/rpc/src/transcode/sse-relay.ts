import type * as http from "node:http";
import type { DescMethodServerStreaming, Message } from "@bufbuild/protobuf";
import type { PlatformError } from "@platform/errors";
import { fromConnectError, platformErrorOf } from "../errors.ts";
import { parkableOf } from "../calls/parkable.ts";
import { type CallAbort, drained, isGone } from "../http/node-io.ts";
import type { Route } from "./routes.ts";
import type { SseFramer } from "./sse.ts";

/** Characters of a burst's frames held before they are written anyway (memory bound of a stream). */
const SSE_HELD_MAX = 64 * 1024;

/** What a relay needs from the REST handler, the same for every stream. */
export interface SseRelayDeps {
  pinger: SsePinger;
  /** Logs a stream that failed after its first event. */
  warn: (res: http.ServerResponse, err: PlatformError) => void;
  /** What failed while relaying a failure: logged as the request's own failure (the response is ended and destroyed). */
  broke: (res: http.ServerResponse, err: unknown) => void;
  /** The stream's error event for a mid-stream failure, when the contract has none. */
  errorEvent?: (err: PlatformError, method: DescMethodServerStreaming) => Message | undefined;
  /** Told once a stream of `route` ended (metrics). */
  closed?: (route: Route) => void;
}

/**
 * Writes a server stream's messages to an open SSE response until the
 * stream ends, fails or its client goes, then releases the call's abort
 * (the response ended, the call closed). Nothing awaits it: the request's handler
 * returns once the relay starts, so no chain of pending promises (each with
 * its async_hooks fields) waits on the stream from the layers above. Driven
 * by promise callbacks, not a loop in an async function, and
 * an object with methods rather than closures: an idle stream (an SSE
 * follower waiting for events, thousands per process) holds this object and
 * its pending read, not a suspended frame with everything the request ever
 * referenced; parked on a stream that can wait on a callback (Parkable: the
 * agents' follows), not even the read. (Named closures cost more here than they look: the services
 * run under tsx, whose keepNames redefines each one's `name`, a dictionary of
 * properties per closure.)
 *
 * The frames of one burst (the events a handler yields before it waits for
 * anything) go out in one write, at the end of the burst: the moment Node's
 * own corking sent them anyway (so no later and in as many syscalls), but as
 * one chunk instead of a chunk (size line, text, CRLF) per frame: a replay
 * page of 250 events was one writev of 750 pieces, each through the stream
 * machinery. The event stream's bytes are the same.
 */
export class SseRelay {
  #held = "";
  #flushQueued = false;
  #draining: Promise<void> | undefined;
  #finished = false;
  /** Waiting, parked on the stream (see Parkable), for its wake(). */
  #parked = false;

  constructor(
    private readonly res: http.ServerResponse,
    private readonly route: Route,
    private readonly framer: SseFramer,
    private readonly it: AsyncIterator<Message>,
    /** The call's abort: a failure after its caller's side aborted it (client gone, shutdown) writes no error event; released once the response is ended and the call closed. */
    private readonly abort: CallAbort,
    private readonly deps: SseRelayDeps,
  ) {
    deps.pinger.add(res);
  }

  /** Relays from the stream's first read (already made, to tell whether the call opened). */
  start(first: Promise<IteratorResult<Message>>): void {
    this.#read(first);
  }

  // Each read is a promise of its own, not chained on the previous one: a long
  // stream builds no chain of promises resolving each other.
  #read(next: Promise<IteratorResult<Message>>): void {
    next.then(
      (r) => this.#relay(r),
      (e: unknown) => this.#failed(e),
    );
  }

  #relay(r: IteratorResult<Message>): void {
    try {
      if (r.done) {
        this.#finish();
        return;
      }
      const frame = this.framer.frame(r.value);
      if (frame) {
        this.#held += frame.text;
        if (frame.terminal) {
          this.#finish();
          return;
        }
        if (this.#held.length >= SSE_HELD_MAX) this.flush();
        else if (!this.#flushQueued) {
          this.#flushQueued = true;
          process.nextTick(flushRelay, this);
        }
        // Backpressure: a slow reader holds the handler, not our memory.
        const draining = this.#draining;
        if (draining) {
          this.#draining = undefined;
          this.#read(draining.then(() => this.it.next()));
          return;
        }
      }
      this.#next();
    } catch (e) {
      this.#failed(e);
    }
  }

  /** The next read: parked on the stream when it can wait so (an idle follower), else a pending next(). */
  #next(): void {
    const parkable = parkableOf(this.it);
    if (parkable) {
      this.#parked = true;
      if (parkable.park(this)) return;
      this.#parked = false;
    }
    this.#read(this.it.next());
  }

  /** The parked stream has something (Waiter): read it. */
  wake(): void {
    if (!this.#parked) return;
    this.#parked = false;
    this.#read(this.it.next());
  }

  flush(): void {
    this.#flushQueued = false;
    if (this.#held === "") return;
    const text = this.#held;
    this.#held = "";
    if (isGone(this.res)) return;
    if (!this.res.write(text)) this.#draining ??= drained(this.res);
  }

  #failed(e: unknown): void {
    try {
      if (!isGone(this.res) && !this.abort.byCaller) {
        const err = platformErrorOf(e) ?? fromConnectError(e);
        this.deps.warn(this.res, err);
        const evMsg =
          this.deps.errorEvent?.(err, this.route.method as DescMethodServerStreaming) ??
          this.framer.errorMessage(safeText(err));
        const frame = evMsg ? this.framer.frame(evMsg) : undefined;
        if (frame) this.#held += frame.text;
      }
    } catch (err) {
      this.#finish({ err });
      return;
    }
    this.#finish();
  }

  /** Closes the stream; `thrown`: what failed while relaying a failure, for the request's own handler. */
  #finish(thrown?: { err: unknown }): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#parked = false;
    this.flush();
    this.deps.pinger.delete(this.res);
    this.deps.closed?.(this.route);
    // Ends the RPC if the handler still runs (terminal event, disconnect).
    void (async () => this.it.return?.())()
      .catch(() => {})
      .then(() => {
        if (!isGone(this.res)) this.res.end();
        this.abort.release();
        if (thrown) this.deps.broke(this.res, thrown.err);
      });
  }
}

function flushRelay(relay: SseRelay): void {
  relay.flush();
}

function safeText(err: PlatformError): string {
  return err.code === 13 || err.code === 2 ? "internal error" : err.message;
}

/**
 * A comment line now and then keeps proxies from closing an idle stream. One
 * timer for all open streams (each is pinged once per interval), not one each.
 */
export class SsePinger {
  readonly #open = new Set<http.ServerResponse>();
  #timer: NodeJS.Timeout | undefined;
  constructor(private readonly intervalMs: number) {}

  add(res: http.ServerResponse): void {
    this.#open.add(res);
    if (!this.#timer) {
      this.#timer = setInterval(() => {
        for (const r of this.#open) r.write(": ping\n\n");
      }, this.intervalMs);
      this.#timer.unref();
    }
  }

  delete(res: http.ServerResponse): void {
    this.#open.delete(res);
    if (this.#open.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
