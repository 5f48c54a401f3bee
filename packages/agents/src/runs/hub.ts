import type { SessionEvent } from "../domain/model.ts";

/** What a follower learns about a session besides its events. */
export type LogState = { lastSeq: number; activeRunId?: string };

/** One follower of a session, as the hub sees it. */
export type Listener = {
  /** A published event, in seq order (it may not be stored yet). */
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
  /** The local run writing this session: its published events not yet stored. */
  unstored?: () => readonly SessionEvent[];
};

/**
 * In-process fan-out of a session's events, per session. A local run
 * publishes each event before it is stored (its unstored tail stays readable
 * here, so a follower that joins late misses nothing); the log stays the
 * source of truth, so a listener that misses an event can read it back.
 */
export class EventHub {
  readonly #channels = new Map<string, Channel>();

  /** Listens to a session; returns its unstored tail as of now (read it after the log) and the unsubscribe. */
  subscribe(sessionId: string, listener: Listener): { unstored: readonly SessionEvent[]; unsubscribe: () => void } {
    const channel = this.#channel(sessionId);
    channel.listeners.add(listener);
    return {
      unstored: channel.unstored?.().slice() ?? [],
      unsubscribe: () => {
        channel.listeners.delete(listener);
        this.#release(sessionId, channel);
      },
    };
  }

  /** Registers the local run writing a session; returns its detach. */
  attachWriter(sessionId: string, unstored: () => readonly SessionEvent[]): () => void {
    const channel = this.#channel(sessionId);
    channel.unstored = unstored;
    return () => {
      if (channel.unstored !== unstored) return;
      channel.unstored = undefined;
      this.#release(sessionId, channel);
    };
  }

  /** Whether a run of this process writes the session (its followers need no polling). */
  hasWriter(sessionId: string): boolean {
    return this.#channels.get(sessionId)?.unstored !== undefined;
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
    if (channel.listeners.size === 0 && !channel.unstored && this.#channels.get(sessionId) === channel) this.#channels.delete(sessionId);
  }
}
