/**
 * How often at most a session's streamed text tokens notify other replicas
 * (PgEventListener), ms. The first store after a quiet spell notifies in its
 * own statement; the ones within the window after it notify once, when the
 * window ends (or at once, if they commit after it). A follower on another
 * replica then sees a token at most this much later than its own replica
 * would have shown it; followers on the run's own replica get every event
 * from the in-process hub at once.
 */
export const NOTIFY_WINDOW_MS = 25;

type Window = { timer: NodeJS.Timeout; pending: boolean };

/**
 * Paces the change notifications of a session while a run streams into it.
 * A notification costs more than its row: PostgreSQL serializes the commits
 * that notify (one lock for the cluster) and wakes every listening backend,
 * whose replica then reads and drops it when it was its own. A token per
 * 3 ms in one session was ~0.2 ms of per-token latency at p50 (bench
 * token-latency, alternated runs with and without the notification). Paced,
 * a stream notifies at most once a window however fast its model is.
 * Nothing is lost by a notification sent late or not at all: followers on
 * other replicas also re-read the log on a timer (Followers).
 */
export class NotifyPacer {
  readonly #windows = new Map<string, Window>();
  #stopped = false;

  constructor(
    /** Sends one notification for the session (after the stores it stands for have committed). */
    private readonly send: (sessionId: string) => Promise<unknown>,
    private readonly windowMs = NOTIFY_WINDOW_MS,
  ) {}

  /**
   * Whether the store about to run notifies in its own statement (true: no
   * window was open for the session, one opens now) or not (false): then
   * the caller calls `stored` once that store has committed.
   */
  claim(sessionId: string): boolean {
    if (this.#windows.has(sessionId)) return false;
    this.#open(sessionId);
    return true;
  }

  /**
   * A store that `claim` left without its notification has committed. Only
   * now does it count for its window's notification: one sent while the
   * store was still in flight would announce rows not yet visible, and
   * nothing after it would. If the window has ended meanwhile, the
   * notification goes out now and a window opens behind it.
   */
  stored(sessionId: string): void {
    if (this.#stopped) return;
    const open = this.#windows.get(sessionId);
    if (open) {
      open.pending = true;
      return;
    }
    this.#announce(sessionId);
  }

  /** Ends every window without its notification (the service stops; the followers' re-reads cover it). */
  stop(): void {
    this.#stopped = true;
    for (const w of this.#windows.values()) clearTimeout(w.timer);
    this.#windows.clear();
  }

  #open(sessionId: string): void {
    const w: Window = { pending: false, timer: setTimeout(() => this.#end(sessionId, w), this.windowMs) };
    // An open window never holds the process up.
    w.timer.unref();
    this.#windows.set(sessionId, w);
  }

  #end(sessionId: string, w: Window): void {
    this.#windows.delete(sessionId);
    // The stream goes on: the next window starts with this notification.
    if (w.pending) this.#announce(sessionId);
  }

  /** Notifies now and opens the window that paces what follows. */
  #announce(sessionId: string): void {
    this.#open(sessionId);
    this.send(sessionId).catch(() => {});
  }
}
