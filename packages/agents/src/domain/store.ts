import type { NetworkPolicy } from "@platform/network-policy";
import type {
  Agent,
  ClientTool,
  McpServer,
  NewEvent,
  Page,
  QueuedSend,
  Session,
  SessionEvent,
  ToolDecision,
  ToolPermissions,
  Waiting,
} from "./model.ts";
import type { Budgets } from "./usage.ts";

export type NewAgent = Omit<
  Agent,
  "id" | "createdAt" | "updatedAt" | "toolPermissions" | "mcpServers" | "clientTools" | "budgets"
> & {
  /** Absent: none (every tool `allow`). */
  toolPermissions?: ToolPermissions;
  /** Absent: none. Header values already sealed. */
  mcpServers?: readonly McpServer[];
  /** Absent: none. */
  clientTools?: readonly ClientTool[];
  /** Absent: no limits. */
  budgets?: Budgets;
};

/** The fields an update sets; absent ones stay as they are. */
export type AgentChanges = Partial<Pick<Agent, "name" | "slug" | "model" | "systemPrompt">> & {
  /** Merged into the agent's policies (each named tool's entry replaced). */
  toolPermissions?: ToolPermissions;
  /** The agent's MCP servers from now on (the domain merged them with the current ones). */
  mcpServers?: readonly McpServer[];
  /** The agent's client tools from now on (the domain merged them with the current ones). */
  clientTools?: readonly ClientTool[];
  /** The agent's budgets from now on (the domain merged them with the current ones). */
  budgets?: Budgets;
  /** The agent's network policy from now on; null: none. */
  networkPolicy?: NetworkPolicy | null;
  /** The image from now on; "": compute's default. */
  image?: string;
};

/**
 * Outcome of recording answers to a paused run's calls: `moved` when the
 * session no longer waits on that `requires_action` (resumed, cancelled, or
 * a run holds it), `duplicate` when one of the calls already has an answer
 * (nothing of the request is recorded then).
 */
export type RecordDecisionsResult = "recorded" | "moved" | "duplicate";

/** Outcome of deleting a session: its sandbox to destroy, or why nothing was deleted. */
export type DeleteSessionResult = { deleted: true; sandboxId?: string } | { deleted: false; busy: boolean };

/**
 * Outcome of trying to take a session for a run. A holder whose lease lapsed
 * (its replica died) still holds it until it is ended (runs/reaper.ts).
 */
export type AcquireResult =
  | { ok: true; session: Session }
  | { ok: false; activeRunId: string; lapsed: boolean }
  | { ok: false; missing: true };

/**
 * How a run is known to be dead although it still holds its session: its
 * lease lapsed; or it was started by an earlier process of this replica
 * (`replica`: the stable name in its owner tag `<replica>#<process>`, and
 * not by this process, `self`); or it was started by any other process
 * (`sole`: the only process using the database has just started).
 */
export type DeadRunsBy = { lapsed: true } | { replica: string; self: string } | { sole: true; self: string };

/** A run that holds its session although its process is gone. */
export type DeadRun = { orgId: string; sessionId: string; runId: string; lastSeq: number };

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
  /** Undefined when missing or deleted; already_exists for a taken slug. */
  updateAgent(orgId: string, id: string, changes: AgentChanges): Promise<Agent | undefined>;
  /** Marks the agent deleted (its sessions stay); false when missing or already deleted. */
  deleteAgent(orgId: string, id: string): Promise<boolean>;

  /** `budgets`: the session's own (absent: none, its agent's apply). */
  createSession(orgId: string, agentId: string, budgets?: Budgets): Promise<Session>;
  getSession(orgId: string, id: string): Promise<Session | undefined>;
  /** Newest first, of the org or of one of its agents; `after` as in listAgents. */
  listSessions(orgId: string, limit: number, options?: { after?: string; agentId?: string }): Promise<Page<Session>>;
  /** Deletes the session and its log unless a live run holds it (busy). */
  deleteSession(orgId: string, id: string): Promise<DeleteSessionResult>;
  /** Events with seq > after, in seq order. */
  listEvents(orgId: string, sessionId: string, after?: number): Promise<SessionEvent[]>;
  /** The session and its events with seq > after (the first `limit` of them when given), in one read; undefined when missing. */
  readLog(
    orgId: string,
    sessionId: string,
    after: number,
    limit?: number,
  ): Promise<{ session: Session; events: SessionEvent[] } | undefined>;

  /**
   * Takes the session for a run (of the process tagged `owner`) unless
   * another run holds it; a holder whose lease lapsed must be ended first.
   */
  acquireRun(orgId: string, sessionId: string, runId: string, leaseMs: number, owner?: string): Promise<AcquireResult>;
  /**
   * Extends the lease; returns whether a cancel was requested for the run
   * (and why: `interrupt` when a send interrupted it).
   */
  renewRun(
    sessionId: string,
    runId: string,
    leaseMs: number,
  ): Promise<{ held: boolean; cancelRequested: boolean; cancelReason?: string }>;
  releaseRun(sessionId: string, runId: string): Promise<void>;
  /**
   * Flags the session's active run for cancellation (`reason` `interrupt`
   * for a send that interrupts; `runId`: only that run); returns its id, if any.
   */
  requestCancel(orgId: string, sessionId: string, reason?: "interrupt", runId?: string): Promise<string | undefined>;
  /**
   * Queues a send: appends its `message_queued` event (next seq, as
   * appendEvents) and its queue row in one statement. With `whileHeld`,
   * only while a live run holds the session (undefined otherwise: the
   * caller may take the session itself, ending a dead holder first).
   */
  enqueue(
    orgId: string,
    sessionId: string,
    event: NewEvent,
    options: { interrupt: boolean; whileHeld: boolean },
  ): Promise<{ event: SessionEvent; heldBy?: string } | undefined>;
  /** The session's queued sends no run has taken, the next first (interrupts first, then by seq). */
  queuedSends(sessionId: string): Promise<QueuedSend[]>;
  /** Up to `limit` sessions that have queued sends and no run holding them (a lost dispatch; the sweep starts them). */
  idleQueues(limit: number): Promise<Array<{ orgId: string; sessionId: string }>>;
  /** Up to `limit` runs that hold a session (or `sessionId`) although they are dead (`by`), longest lapsed first. */
  deadRuns(by: DeadRunsBy, limit: number, sessionId?: string): Promise<DeadRun[]>;
  /** The tool calls of `runId` in the session's log that have no result. */
  openToolUses(sessionId: string, runId: string): Promise<string[]>;

  /**
   * Appends events to the log with the next gapless per-session seqs,
   * atomically: concurrent appends never share or skip a seq. With
   * `release`, the same statement frees the session from `runId`, so a
   * client that has seen the terminal event can start the next run at once.
   */
  appendEvents(
    sessionId: string,
    runId: string | undefined,
    events: readonly NewEvent[],
    options?: { release?: boolean },
  ): Promise<SessionEvent[]>;
  /**
   * Stores events a run has already numbered and published (it holds the
   * session, so it hands out the next seqs itself), atomically. Succeeds
   * only while `runId` holds the session and the log ends right before the
   * first of them: a run that lost the session gets `aborted` and cannot
   * write between another run's events.
   * `release` as in appendEvents. With `ifDead`, only while `runId` is dead
   * that way (a takeover: the dead run's closing events, written by another).
   * A message event carrying `queuedSeq` takes that queued send off the
   * queue in the same statement. While the run still holds the session but
   * a queued send moved the log's end, `aborted` with reason `log_moved`
   * and the log's end in `extra.lastSeq`: the run numbers its unpublished
   * events again from there.
   */
  storeEvents(
    sessionId: string,
    runId: string,
    events: readonly SessionEvent[],
    options?: { release?: boolean; ifDead?: DeadRunsBy },
  ): Promise<void>;
  /** The session's paused run, when its log ends with a `requires_action` event; undefined otherwise. */
  waiting(orgId: string, sessionId: string): Promise<Waiting | undefined>;
  /**
   * Records answers to the calls of the `requires_action` at `requestSeq`,
   * all or none, only while it still ends the log and no run holds the session.
   */
  recordDecisions(
    sessionId: string,
    requestSeq: number,
    decisions: readonly ToolDecision[],
  ): Promise<RecordDecisionsResult>;
  /** Records the session's sandbox (first tool call). */
  setSandbox(sessionId: string, sandboxId: string): Promise<void>;

  ping(): Promise<void>;
}
