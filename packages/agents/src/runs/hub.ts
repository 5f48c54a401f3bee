import type { SessionEvent } from "../domain/model.ts";

/** What a follower learns about a session besides its events. */
export type LogState = { lastSeq: number; activeRunId?: string };

/** One follower of a session, as the hub sees it. */
export type Listener = {
  /** A published event, in seq order (it is in the log already). */
  event(event: SessionEvent): void;
  /**
   * The log changed in a way only the database can tell: with a state, as
   * a shared poll just read it (the follower compares it with what it has);
   * without one, unconditionally (another replica's notification).
   */
  changed(state?: LogState): void;
};

type Channel = {
  listeners: Set<Listener>;
  /** The local run writing this session, if any. */
  writer?: symbol;
};

/**
 * In-process fan-out of a session's events, per session. A local run
 * publishes each event once it is stored (runs/run-log.ts), so a follower
 * that subscribes, then reads the log, misses nothing: an event is either in
 * what it read or published after it subscribed. The log is the source of
 * truth; a listener that misses an event reads it back.
 */
export class EventHub {
  readonly #channels = new Map<string, Channel>();

  /** Listens to a session; subscribe before reading the log. Returns the unsubscribe. */
  subscribe(sessionId: string, listener: Listener): () => void {
    const channel = this.#channel(sessionId);
    channel.listeners.add(listener);
    return () => {
      channel.listeners.delete(listener);
      this.#release(sessionId, channel);
    };
  }

  /**
   * subscribe without a closure to undo it (leave does): a follower holds no
   * unsubscribe function, with its context, for as long as it waits.
   */
  join(sessionId: string, listener: Listener): void {
    this.#channel(sessionId).listeners.add(listener);
  }

  /** Stops a join's listening. (The channel holding a listener is its session's current one: it is released only empty.) */
  leave(sessionId: string, listener: Listener): void {
    const channel = this.#channels.get(sessionId);
    if (!channel) return;
    channel.listeners.delete(listener);
    this.#release(sessionId, channel);
  }

  /** Registers the local run writing a session; returns its detach. */
  attachWriter(sessionId: string): () => void {
    const channel = this.#channel(sessionId);
    const writer = Symbol(sessionId);
    channel.writer = writer;
    return () => {
      if (channel.writer !== writer) return;
      channel.writer = undefined;
      this.#release(sessionId, channel);
    };
  }

  /** Whether a run of this process writes the session (its followers need no polling). */
  hasWriter(sessionId: string): boolean {
    return this.#channels.get(sessionId)?.writer !== undefined;
  }

  publish(sessionId: string, events: readonly SessionEvent[]): void {
    const channel = this.#channels.get(sessionId);
    if (!channel || channel.listeners.size === 0) return;
    const listeners = [...channel.listeners];
    for (const event of events) for (const listener of listeners) listener.event(event);
  }

  /** Tells the session's followers the log changed (see Listener.changed). */
  changed(sessionId: string, state?: LogState): void {
    const channel = this.#channels.get(sessionId);
    if (!channel) return;
    for (const listener of [...channel.listeners]) listener.changed(state);
  }

  listenerCount(sessionId: string): number {
    return this.#channels.get(sessionId)?.listeners.size ?? 0;
  }

  #channel(sessionId: string): Channel {
    let channel = this.#channels.get(sessionId);
    if (!channel) this.#channels.set(sessionId, (channel = { listeners: new Set() }));
    return channel;
  }

  #release(sessionId: string, channel: Channel): void {
    if (channel.listeners.size === 0 && !channel.writer && this.#channels.get(sessionId) === channel)
      this.#channels.delete(sessionId);
  }
}
