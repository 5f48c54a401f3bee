import type { Agent, NewEvent, Page, Session, SessionEvent } from "./model.ts";

export type NewAgent = Omit<Agent, "id" | "createdAt" | "updatedAt">;

/** Outcome of trying to take a session for a run. */
export type AcquireResult = { ok: true; session: Session } | { ok: false; activeRunId: string } | { ok: false; missing: true };

/**
 * Persistence port of the agents domain. Every read and write is scoped to an
 * org: a row of another org behaves exactly like a missing row.
 */
export interface Store {
  /** Throws already_exists when the slug is taken in the org. */
  createAgent(agent: NewAgent): Promise<Agent>;
  getAgent(orgId: string, id: string): Promise<Agent | undefined>;
  /** Newest first; `after` is an opaque cursor from a previous page. */
  listAgents(orgId: string, limit: number, after?: string): Promise<Page<Agent>>;

  createSession(orgId: string, agentId: string): Promise<Session>;
  getSession(orgId: string, id: string): Promise<Session | undefined>;
  /** Events with seq > after, in seq order. */
  listEvents(orgId: string, sessionId: string, after?: number): Promise<SessionEvent[]>;
  /** The session and its events with seq > after, in one read (a follower's open); undefined when missing. */
  readLog(orgId: string, sessionId: string, after: number): Promise<{ session: Session; events: SessionEvent[] } | undefined>;

  /**
   * Takes the session for a run unless another live run holds it. A holder
   * whose lease has lapsed (its process died) is replaced.
   */
  acquireRun(orgId: string, sessionId: string, runId: string, leaseMs: number): Promise<AcquireResult>;
  /** Extends the lease; returns whether a cancel was requested for the run. */
  renewRun(sessionId: string, runId: string, leaseMs: number): Promise<{ held: boolean; cancelRequested: boolean }>;
  releaseRun(sessionId: string, runId: string): Promise<void>;
  /** Flags the session's active run for cancellation; returns its id, if any. */
  requestCancel(orgId: string, sessionId: string): Promise<string | undefined>;

  /**
   * Appends events to the log with the next gapless per-session seqs,
   * atomically: concurrent appends never share or skip a seq. With
   * `release`, the same statement frees the session from `runId`, so a
   * client that has seen the terminal event can start the next run at once.
   */
  appendEvents(sessionId: string, runId: string | undefined, events: readonly NewEvent[], options?: { release?: boolean }): Promise<SessionEvent[]>;
  /**
   * Stores events a run has already numbered and published (it holds the
   * session, so it hands out the next seqs itself), atomically. Succeeds
   * only while `runId` holds the session and the log ends right before the
   * first of them: a run that lost the session gets `aborted` and cannot
   * write between another run's events.
   * `release` as in appendEvents.
   */
  storeEvents(sessionId: string, runId: string, events: readonly SessionEvent[], options?: { release?: boolean }): Promise<void>;
  /** Records the session's sandbox (first tool call). */
  setSandbox(sessionId: string, sandboxId: string): Promise<void>;

  ping(): Promise<void>;
}
