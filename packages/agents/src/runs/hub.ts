import type { SessionEvent } from "../domain/model.ts";

/** Receives an appended event, or nothing: "the log changed, read it" (another replica wrote). */
type Listener = (event?: SessionEvent) => void;

/**
 * In-process fan-out of appended events, per session. It only carries events
 * already in the log, so a listener that misses one can always read it back.
 */
export class EventHub {
  readonly #listeners = new Map<string, Set<Listener>>();

  subscribe(sessionId: string, listener: Listener): () => void {
    let set = this.#listeners.get(sessionId);
    if (!set) this.#listeners.set(sessionId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(sessionId) === set) this.#listeners.delete(sessionId);
    };
  }

  publish(sessionId: string, events: readonly SessionEvent[]): void {
    const set = this.#listeners.get(sessionId);
    if (!set) return;
    for (const event of events) for (const listener of [...set]) listener(event);
  }

  /** Tells the session's followers the log changed without saying how (a notification from another replica). */
  wake(sessionId: string): void {
    const set = this.#listeners.get(sessionId);
    if (!set) return;
    for (const listener of [...set]) listener();
  }

  listenerCount(sessionId: string): number {
    return this.#listeners.get(sessionId)?.size ?? 0;
  }
}
