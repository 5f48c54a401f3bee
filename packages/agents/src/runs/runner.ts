import { randomUUID } from "node:crypto";
import { Code, PlatformError } from "@platform/errors";
import { inWorkSpan, startWorkSpan, type WorkSpan } from "@platform/rpc";
import type { Logger } from "pino";
import { readWholeLog } from "../domain/log-pages.ts";
import type {
  Agent,
  AuthContext,
  MessageInput,
  NewEvent,
  SendMode,
  Session,
  ToolDecision,
  Waiting,
} from "../domain/model.ts";
import type { Runs, Sandboxes, SendOutcome, StartedRun } from "../domain/ports.ts";
import { SessionSandbox } from "../domain/session-sandbox.ts";
import type { Store } from "../domain/store.ts";
import { type BudgetHit, budgetExhausted, type UsageStore } from "../domain/usage.ts";
import type { ModelEvent, ModelRequest, ToolCall } from "../providers/provider.ts";
import type { ProviderRegistry } from "../providers/registry.ts";
import { ClientToolset, clientResult } from "../tools/client-tools.ts";
import { defaultMcpOptions, type McpOptions, McpTools } from "../tools/mcp/mcp-tools.ts";
import type { Toolbox, ToolResult } from "../tools/toolbox.ts";
import { historyOf, openCallsOf, toolUseContent } from "./history.ts";
import type { EventHub } from "./hub.ts";
import type { Reaper } from "./reaper.ts";
import { type LogFailure, RunLog } from "./run-log.ts";
import { ToolOutput } from "./tool-output.ts";
import { UsageMeter } from "./usage-meter.ts";

export type RunnerOptions = {
  /** A run's hold on its session; renewed while it runs, so a crashed replica's run lapses. */
  leaseMs: number;
  /** Model calls in one run (each tool round is one more); past it the run ends with an error. */
  maxModelCalls: number;
  maxTokens: number;
  /**
   * This process's tag on the runs it starts, `<replica>#<process>` (see
   * DeadRunsBy): a restarted replica ends its predecessor's runs at once.
   */
  owner: string;
  /**
   * How long a send waits for the database to store its messages before it
   * answers 503 (the run then ends with an error once the database is back).
   */
  storePatienceMs?: number;
  /** How long a shutdown waits for runs to store their terminal events before it gives up on them. */
  stopPatienceMs?: number;
  /** How runs reach their agents' MCP servers (tools/mcp); absent: defaults without a secrets key. */
  mcp?: McpOptions;
  /** Where runs record their usage and read the session's so far (budgets); absent: nothing is metered. */
  usage?: UsageStore;
};

type Active = { runId: string; abort: AbortController; log: RunLog };

/**
 * Runs turns: takes the session (one run at a time), appends the client's
 * messages, calls the model, dispatches tool calls and stores every
 * produced event, publishing it once stored (see RunLog). A run is detached
 * from the request that started it: it goes on when the client disconnects
 * and ends only with `done`, `error` or an explicit cancel; a run whose
 * process died is ended by the Reaper.
 */
export class Runner implements Runs {
  readonly #active = new Map<string, Active>();
  readonly #running = new Set<Promise<void>>();
  #stopping = false;
  #reaper: Reaper | undefined;

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    private readonly providers: ProviderRegistry,
    private readonly toolbox: Toolbox,
    private readonly sandboxes: Sandboxes,
    private readonly options: RunnerOptions,
    private readonly logger: Logger,
  ) {}

  /** The reaper that ends a dead run holding a session this runner wants. */
  useReaper(reaper: Reaper): void {
    this.#reaper = reaper;
  }

  /** Whether `runId` is a run of this process. */
  isLocal(runId: string): boolean {
    for (const active of this.#active.values()) if (active.runId === runId) return true;
    return false;
  }

  /**
   * Starts a run. Resolves once the model accepted the first call; throws
   * `aborted` (409) while another run holds the session and `unavailable`
   * (503) when the model cannot be reached; in that case the log records the
   * messages and an `error` event.
   */
  async start(
    auth: AuthContext,
    agent: Agent,
    sessionId: string,
    messages: readonly MessageInput[],
    requestLogger?: Logger,
    /** The queued send these messages come from: its `message_queued` seq (the run takes it off the queue). */
    queuedSeq?: number,
  ): Promise<StartedRun> {
    if (this.#stopping) throw PlatformError.unavailable("the service is shutting down; retry on another replica");
    const runId = randomUUID();
    // The run outlives its request; its log lines keep the request's ids.
    const logger = (requestLogger ?? this.logger).child({ sessionId, runId });
    let taken = await this.store.acquireRun(auth.orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    // A run whose process died still holds the session: end it, then take it.
    if (
      !taken.ok &&
      "lapsed" in taken &&
      taken.lapsed &&
      this.#reaper &&
      (await this.#reaper.endIfLapsed(sessionId, taken.activeRunId))
    ) {
      logger.info({ deadRunId: taken.activeRunId }, "ended the session's dead run");
      taken = await this.store.acquireRun(auth.orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    }
    if (!taken.ok) {
      if ("missing" in taken) throw PlatformError.notFound("session not found");
      throw new PlatformError(
        Code.Aborted,
        "aborted",
        `session ${sessionId} has an active run ${taken.activeRunId}; wait for it to end or cancel it`,
        {
          activeRunId: taken.activeRunId,
        },
      );
    }
    // Checked while holding the session: a run that paused just before is seen.
    const waiting = await this.#waitingOrRelease(auth.orgId, sessionId, runId);
    if (waiting) {
      await this.store.releaseRun(sessionId, runId);
      const open = waiting.calls.filter((c) => !waiting.decisions.has(c.toolUseId)).map((c) => c.toolUseId);
      throw new PlatformError(
        Code.Aborted,
        "tool_calls_pending",
        open.length > 0
          ? `session ${sessionId} waits for answers to its tool calls ${open.join(", ")}: answer them (POST /v1/sessions/${sessionId}/tool-decisions) or cancel the run`
          : `session ${sessionId} waits to resume its answered tool calls: send an empty decisions list to POST /v1/sessions/${sessionId}/tool-decisions, or cancel the run`,
        { pendingToolCalls: open.join(",") },
      );
    }
    // Usage and budgets: a session past one takes no message until it is raised.
    const usage = await this.#whileHolding(
      sessionId,
      runId,
      UsageMeter.load(this.options.usage, agent, taken.session, runId, logger),
    );
    const over = usage.reached();
    if (over) {
      await this.store.releaseRun(sessionId, runId);
      throw budgetExhausted(sessionId, over);
    }
    const abort = new AbortController();
    const run = this.#newRun(logger, { auth, agent, session: taken.session, runId, abort, usage });
    run.log.publish(
      messages.map((m) => ({
        type: m.role as NewEvent["type"],
        content: m.content,
        toolUseId: m.toolUseId,
        isError: m.isError,
        ...(queuedSeq !== undefined ? { queuedSeq } : {}),
      })),
    );
    const lastMessageSeq = taken.session.lastSeq + messages.length;
    let first: AsyncIterable<ModelEvent>;
    try {
      first = await run.call(this.options.storePatienceMs ?? 5000);
    } catch (err) {
      // With the database down the error event is stored once it is back: answer now.
      const failed = run.fail(err).catch(() => {});
      this.#track(failed);
      await Promise.race([failed, delay(this.options.storePatienceMs ?? 5000)]);
      if (err instanceof PlatformError) throw err;
      // Cancelled or shut down before the model answered.
      if (abort.signal.aborted)
        throw PlatformError.unavailable(
          abort.signal.reason instanceof Error ? abort.signal.reason.message : "the run was cancelled",
        );
      throw PlatformError.from(err);
    }
    this.#track(run.continue(first));
    logger.info({ agentId: agent.id, model: agent.model }, "run started");
    return { runId, session: taken.session, lastMessageSeq };
  }

  /**
   * A send by its mode (see Runs.send). The queue is the log itself: a
   * queued send is a `message_queued` event plus a row of session_queue,
   * written in one statement while a run holds the session (so that run,
   * or whoever ends it, takes the queue next: dispatch). A send finding
   * the session free starts its run unless sends are queued before it.
   */
  async send(
    auth: AuthContext,
    agent: Agent,
    sessionId: string,
    messages: readonly MessageInput[],
    mode: SendMode,
    requestLogger?: Logger,
  ): Promise<SendOutcome> {
    if (this.#stopping) throw PlatformError.unavailable("the service is shutting down; retry on another replica");
    const interrupt = mode === "interrupt";
    const event: NewEvent = { type: "message_queued", content: queuedContent(messages, mode) };
    // Each round either queues, starts, or lost a race with a run that
    // started or ended in between (then the next round sees it).
    for (let round = 0; round < 5; round++) {
      const queued = await this.store.queuedSends(sessionId);
      // The queue is bounded: a client cannot grow a session's log and queue without limit.
      if (mode !== "reject" && queued.length >= MAX_QUEUED_SENDS)
        throw new PlatformError(
          Code.ResourceExhausted,
          "queue_full",
          `session ${sessionId} has ${MAX_QUEUED_SENDS} queued sends already; wait for them to run (or send with mode "interrupt" later)`,
        );
      if (mode !== "reject") {
        const held = await this.store.enqueue(auth.orgId, sessionId, event, { interrupt, whileHeld: true });
        if (held) {
          this.hub.changed(sessionId);
          if (interrupt && held.heldBy) await this.#interrupt(auth.orgId, sessionId, held.heldBy);
          return { queued: held.event };
        }
      }
      if (queued.length > 0 && !interrupt) {
        if (mode === "reject")
          throw new PlatformError(
            Code.Aborted,
            "aborted",
            `session ${sessionId} has ${queued.length} queued send(s) waiting for a run; send with mode "enqueue" to queue behind them`,
          );
        // Sends queued before this one go first: queue it behind them and hand the queue to a run.
        const behind = await this.store.enqueue(auth.orgId, sessionId, event, { interrupt, whileHeld: false });
        if (!behind) throw PlatformError.notFound("session not found");
        this.hub.changed(sessionId);
        void this.dispatch(auth.orgId, sessionId);
        return { queued: behind.event };
      }
      try {
        return { started: await this.start(auth, agent, sessionId, messages, requestLogger) };
      } catch (err) {
        // Taken by a run meanwhile: queue behind it (next round).
        if (mode === "reject" || !(err instanceof PlatformError) || err.reason !== "aborted") throw err;
      }
    }
    throw new PlatformError(Code.Aborted, "aborted", `session ${sessionId} is busy; send again`);
  }

  /** Stops `runId` for an interrupting send: here at once, elsewhere through the database. */
  async #interrupt(orgId: string, sessionId: string, runId: string): Promise<void> {
    const flagged = await this.store.requestCancel(orgId, sessionId, "interrupt", runId);
    const local = this.#active.get(sessionId);
    if (flagged && local?.runId === flagged) local.abort.abort(new RunInterrupted());
  }

  /**
   * Hands the session's queue to a run: when no run holds the session and
   * it does not wait on tool calls, the next queued send (interrupts first,
   * then in order) starts a run. Called when a run of this process ends,
   * when a dead run was ended, by the periodic sweep and by followers of a
   * queued send; several callers at once are fine (one takes the session).
   * Never throws.
   */
  async dispatch(orgId: string, sessionId: string): Promise<void> {
    if (this.#stopping) return;
    try {
      const [next] = await this.store.queuedSends(sessionId);
      if (!next) return;
      const session = await this.store.getSession(orgId, sessionId);
      if (!session || session.activeRunId || session.lapsedRunId) return;
      const auth: AuthContext = { userId: "", orgId, method: "queue" };
      const agent = await this.store.getAgent(orgId, session.agentId);
      if (!agent) {
        await this.#refuseQueued(orgId, sessionId, next.seq, next.messages, "agent not found");
        return;
      }
      await this.start(auth, agent, sessionId, next.messages, undefined, next.seq);
    } catch (err) {
      // Taken by someone else, waiting on tool calls, a budget reached, or the model
      // down (that run stored the messages and its error): nothing more to do here.
      if (err instanceof PlatformError && err.code !== Code.Internal) return;
      this.logger.warn({ err, sessionId }, "could not start a queued send");
    }
  }

  /** Takes a queued send that cannot run: its messages and an `error` event go to the log. */
  async #refuseQueued(
    orgId: string,
    sessionId: string,
    seq: number,
    messages: readonly MessageInput[],
    why: string,
  ): Promise<void> {
    const runId = randomUUID();
    const taken = await this.store.acquireRun(orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    if (!taken.ok) return;
    const log = new RunLog(this.store, this.hub, sessionId, runId, taken.session.lastSeq, this.logger);
    log.publish(
      messages.map((m) => ({
        type: m.role as NewEvent["type"],
        content: m.content,
        toolUseId: m.toolUseId,
        isError: m.isError,
        queuedSeq: seq,
      })),
    );
    if (!(await log.finish([{ type: "error", content: why }]))) await this.store.releaseRun(sessionId, runId);
    // The next queued send, if any.
    void this.dispatch(orgId, sessionId);
  }

  /** Starts the queued sends of sessions no run holds (a dispatch lost to a crash); returns how many it tried. */
  async dispatchIdle(limit = 100): Promise<number> {
    if (this.#stopping) return 0;
    const idle = await this.store.idleQueues(limit);
    for (const { orgId, sessionId } of idle) await this.dispatch(orgId, sessionId);
    return idle.length;
  }

  /**
   * Resumes a run that paused on tool calls, once every one has its answer:
   * a new run takes the session, runs the paused run's remaining calls in
   * their order (an allowed one in the sandbox as usual, a denied one as an
   * error result carrying the person's message) and goes on with the
   * model. Undefined when the session no longer waits on `waiting` (another
   * request resumed it, or it was cancelled).
   */
  async resume(auth: AuthContext, agent: Agent, sessionId: string, waiting: Waiting, requestLogger?: Logger) {
    if (this.#stopping) throw PlatformError.unavailable("the service is shutting down; retry on another replica");
    const runId = randomUUID();
    const logger = (requestLogger ?? this.logger).child({ sessionId, runId });
    // A send that holds the session for its check (it lets go at once) or
    // a dead holder: take it once that is over, while the pause still waits.
    const deadline = Date.now() + 5000;
    let taken = await this.store.acquireRun(auth.orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    while (!taken.ok) {
      if ("missing" in taken) throw PlatformError.notFound("session not found");
      if (taken.lapsed && this.#reaper) await this.#reaper.endIfLapsed(sessionId, taken.activeRunId);
      const now = await this.store.waiting(auth.orgId, sessionId);
      if (now?.seq !== waiting.seq || Date.now() > deadline) return undefined;
      await delay(20);
      taken = await this.store.acquireRun(auth.orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    }
    const now = await this.#waitingOrRelease(auth.orgId, sessionId, runId);
    const answered = now?.seq === waiting.seq && now.calls.every((c) => now.decisions.has(c.toolUseId));
    const log = answered
      ? await this.#whileHolding(sessionId, runId, readWholeLog(this.store, auth.orgId, sessionId))
      : undefined;
    if (!now || !answered || !log || log.session.lastSeq !== waiting.seq) {
      await this.store.releaseRun(sessionId, runId);
      return undefined;
    }
    const calls = openCallsOf(log.events, waiting.runId);
    const usage = await this.#whileHolding(
      sessionId,
      runId,
      UsageMeter.load(this.options.usage, agent, taken.session, runId, logger),
    );
    const abort = new AbortController();
    const run = this.#newRun(logger, { auth, agent, session: taken.session, runId, abort, usage });
    this.#track(run.continue(undefined, { calls, decisions: now.decisions }));
    logger.info({ agentId: agent.id, calls: calls.length, pausedRunId: waiting.runId }, "run resumed");
    return { runId, session: taken.session, lastMessageSeq: waiting.seq };
  }

  /** A run of a session this process now holds, registered as active (started and resumed runs alike). */
  #newRun(logger: Logger, context: RunContext): Run {
    const run = new Run(
      this,
      this.store,
      this.hub,
      this.providers,
      this.toolbox,
      this.sandboxes,
      this.options,
      logger,
      context,
    );
    this.#active.set(context.session.id, { runId: context.runId, abort: context.abort, log: run.log });
    return run;
  }

  /** The session's pause, read while `runId` holds it (released when the read fails). */
  #waitingOrRelease(orgId: string, sessionId: string, runId: string): Promise<Waiting | undefined> {
    return this.#whileHolding(sessionId, runId, this.store.waiting(orgId, sessionId));
  }

  /**
   * Work done while `runId` holds the session before a run exists to end
   * it: a failure lets the session go at once (else its lease would lapse
   * and the reaper would end the pause with an interruption).
   */
  async #whileHolding<T>(sessionId: string, runId: string, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (err) {
      await this.store.releaseRun(sessionId, runId).catch(() => {});
      throw err;
    }
  }

  /**
   * Cancels a paused run: its calls get an error result and the log an
   * `error` event, so the session takes new messages. False when it does not
   * wait (or something else took it first).
   */
  async #cancelWaiting(orgId: string, sessionId: string): Promise<boolean> {
    const waiting = await this.store.waiting(orgId, sessionId);
    if (!waiting) return false;
    const runId = randomUUID();
    const taken = await this.store.acquireRun(orgId, sessionId, runId, this.options.leaseMs, this.options.owner);
    if (!taken.ok) return false;
    const log = await this.#whileHolding(sessionId, runId, readWholeLog(this.store, orgId, sessionId));
    if (!log || log.session.lastSeq !== waiting.seq) {
      await this.store.releaseRun(sessionId, runId);
      return false;
    }
    const closing: NewEvent[] = [
      ...openCallsOf(log.events, waiting.runId).map((call) => ({
        type: "tool_result" as const,
        content: JSON.stringify({
          error: "the tool call was not run: the run was cancelled while it waited for an answer",
        }),
        toolUseId: call.id,
        isError: true,
      })),
      { type: "error", content: "the run was cancelled" },
    ];
    await this.#whileHolding(sessionId, runId, this.store.appendEvents(sessionId, runId, closing, { release: true }));
    // Followers here learn of it now (this process's own notification is skipped).
    this.hub.changed(sessionId);
    void this.dispatch(orgId, sessionId);
    return true;
  }

  #track(work: Promise<void>): void {
    const tracked = work.finally(() => {
      this.#running.delete(tracked);
    });
    this.#running.add(tracked);
  }

  /** How long a dead replica's run can hold its session. */
  get leaseMs(): number {
    return this.options.leaseMs;
  }

  /** Cancels the session's active run, here or (through the database flag) on another replica. */
  async cancel(orgId: string, sessionId: string): Promise<boolean> {
    const runId = await this.store.requestCancel(orgId, sessionId);
    if (!runId) return this.#cancelWaiting(orgId, sessionId);
    const local = this.#active.get(sessionId);
    if (local?.runId === runId) local.abort.abort(new RunCancelled());
    return true;
  }

  /**
   * Shutdown: cancels every local run and waits for their terminal events to
   * be stored; past `stopPatienceMs` (the database is down) it gives up on
   * them: what they did not store was never published, and their leases
   * lapse, so a replica or the next start ends them (Reaper).
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const { abort } of this.#active.values()) abort.abort(new RunCancelled("the server is shutting down"));
    const settled = Promise.allSettled([...this.#running]).then(() => true);
    if (!(await Promise.race([settled, delay(this.options.stopPatienceMs ?? 10_000).then(() => false)]))) {
      this.logger.warn(
        { runs: this.#active.size },
        "shutting down without the terminal events of runs the database did not take",
      );
      for (const { log } of this.#active.values()) log.abandon();
      await settled;
    }
  }

  /** Resolves when every run started so far has ended (tests). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  finished(sessionId: string, runId: string): void {
    if (this.#active.get(sessionId)?.runId === runId) this.#active.delete(sessionId);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Thrown at a budget check: the run ends with `budget_reached` (see Run.#budgetEnd). */
class BudgetStop extends Error {
  constructor(
    readonly hit: BudgetHit,
    readonly open: readonly ToolCall[],
  ) {
    super(`the session reached its ${hit.budget} budget`);
  }
}

/** What one run is for: who asked, the agent, the session it holds, its id, its cancel switch, its usage. */
type RunContext = {
  auth: AuthContext;
  agent: Agent;
  session: Session;
  runId: string;
  abort: AbortController;
  usage: UsageMeter;
};

class RunCancelled extends Error {
  constructor(message = "the run was cancelled") {
    super(message);
  }
}

/** Queued sends a session holds at most (a send past it is 429 `queue_full`). */
export const MAX_QUEUED_SENDS = 32;

/** The `error` that ends a run a send with mode `interrupt` stopped. */
export const RUN_INTERRUPTED_BY_SEND = "the run was interrupted by a new message";
/** The result of the tool call an interrupt stopped. */
export const TOOL_INTERRUPTED_BY_SEND = JSON.stringify({ error: "the tool call was interrupted by a new message" });

/** A send with mode `interrupt` stopped the run: it ends, its queue goes on with that send. */
class RunInterrupted extends RunCancelled {
  constructor() {
    super(RUN_INTERRUPTED_BY_SEND);
  }
}

/** A queued send's `message_queued` content: its messages and mode. */
function queuedContent(messages: readonly MessageInput[], mode: SendMode): string {
  return JSON.stringify({
    messages: messages.map((m) => ({
      role: m.role,
      content: m.content,
      ...(m.toolUseId ? { toolUseId: m.toolUseId } : {}),
      ...(m.isError ? { isError: true } : {}),
    })),
    mode,
  });
}

class Run {
  private readonly auth: AuthContext;
  private readonly agent: Agent;
  private readonly session: Session;
  private readonly runId: string;
  private readonly abort: AbortController;
  #tokensIn = 0;
  #tokensOut = 0;
  #calls = 0;
  /** The session's sandbox, owned by this run: its pauses, resumes and replacements go to the log. */
  readonly #sandbox: SessionSandbox;
  /** The agent's MCP servers, connected (and their tools listed) once per run. */
  readonly #mcp: McpTools;
  /** The agent's client tools: offered to the model, their calls answered by the client. */
  readonly #clientTools: ClientToolset;
  /** The session's usage and budgets, checked before each model call and each tool call. */
  readonly #usage: UsageMeter;
  /** The model call being read (from call() to the end of #consume): its span. */
  #modelSpan: WorkSpan | undefined;
  /** The tool call running now, named on the sandbox events it causes. */
  #toolUseId = "";
  #renewal: NodeJS.Timeout | undefined;
  /** When the lease was last renewed (or taken), by this process's clock. */
  #renewedAt = Date.now();
  readonly log: RunLog;

  constructor(
    private readonly runner: Runner,
    private readonly store: Store,
    hub: EventHub,
    private readonly providers: ProviderRegistry,
    private readonly toolbox: Toolbox,
    sandboxes: Sandboxes,
    private readonly options: RunnerOptions,
    private readonly logger: Logger,
    context: RunContext,
  ) {
    this.auth = context.auth;
    this.agent = context.agent;
    this.session = context.session;
    this.runId = context.runId;
    this.abort = context.abort;
    this.#usage = context.usage;
    this.#mcp = new McpTools(this.auth.orgId, this.agent.mcpServers, options.mcp ?? defaultMcpOptions(), logger);
    this.#clientTools = new ClientToolset(this.agent.clientTools);
    this.#sandbox = new SessionSandbox(store, this.#usage.sandboxes(sandboxes), this.session, {
      observe: true,
      ...(this.agent.networkPolicy ? { networkPolicy: this.agent.networkPolicy } : {}),
      ...(this.agent.image ? { image: this.agent.image } : {}),
      onEvent: ({ type, ...content }) =>
        this.log.publish([{ type, content: JSON.stringify(content), toolUseId: this.#toolUseId }]),
    });
    this.#renewal = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.options.leaseMs / 3)));
    this.#renewal.unref();
    this.log = new RunLog(store, hub, this.session.id, this.runId, this.session.lastSeq, logger, {
      onFailure: (failure) => this.abort.abort(stopReason(failure)),
    });
  }

  /** One model call over the whole log so far (stored first: the model sees what the log holds). */
  async call(storePatienceMs?: number): Promise<AsyncIterable<ModelEvent>> {
    this.#calls++;
    const { provider, model } = this.providers.resolve(this.agent.model);
    // OpenTelemetry's GenAI names; the span ends when #consume has read the reply (token counts then).
    const span = startWorkSpan(`chat ${model}`, {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": this.agent.model.split("/")[0] ?? "",
      "gen_ai.request.model": model,
      "platform.session_id": this.session.id,
    });
    try {
      // The database statement groups of a model call, each a span under it.
      await span.run(() =>
        inWorkSpan("db store events", { "db.operation.name": "INSERT" }, () =>
          this.log.flush(this.abort.signal, storePatienceMs),
        ),
      );
      // In pages: the whole log is read for every model call.
      const page = await span.run(() =>
        inWorkSpan("db read session log", { "db.operation.name": "SELECT" }, () =>
          readWholeLog(this.store, this.auth.orgId, this.session.id),
        ),
      );
      const log = page?.events ?? [];
      const request: ModelRequest = {
        model,
        system: this.agent.systemPrompt,
        messages: historyOf(log),
        tools: [...this.toolbox.specs, ...this.#clientTools.specs],
        maxTokens: this.options.maxTokens,
      };
      request.tools = [...request.tools, ...(await this.#mcp.specs(this.abort.signal))];
      const stream = await span.run(() => provider.start(request, this.abort.signal));
      this.#modelSpan = span;
      return stream;
    } catch (err) {
      span.fail(err);
      span.end();
      throw err;
    }
  }

  /**
   * Drives the run to its terminal event. Never throws. A resumed run
   * starts with the paused run's remaining calls and their answers.
   */
  async continue(
    first: AsyncIterable<ModelEvent> | undefined,
    resumed?: { calls: ToolCall[]; decisions: ReadonlyMap<string, ToolDecision> },
  ): Promise<void> {
    let stream: AsyncIterable<ModelEvent> | undefined = first;
    let calls = resumed?.calls ?? [];
    let decisions = resumed?.decisions;
    try {
      for (;;) {
        if (stream) {
          calls = await this.#consume(stream);
          stream = undefined;
          decisions = undefined;
        }
        if (calls.length === 0) break;
        const pending = await this.#runCalls(calls, decisions);
        if (pending.length > 0) {
          // The pause is this run's end: stored with the session's release.
          await this.#finish([
            {
              type: "requires_action",
              content: JSON.stringify({
                calls: pending.map((c) => ({
                  toolUseId: c.id,
                  name: c.name,
                  input: c.input,
                  // The client answers this one with the tool's result, not allow/deny.
                  ...(this.#clientTools.has(c.name) ? { kind: "client" } : {}),
                })),
              }),
              tokensIn: this.#tokensIn,
              tokensOut: this.#tokensOut,
            },
          ]);
          this.logger.info({ pending: pending.length }, "run paused for tool decisions");
          return;
        }
        if (this.#calls >= this.options.maxModelCalls) {
          throw PlatformError.failedPrecondition(
            `the run reached its limit of ${this.options.maxModelCalls} model calls`,
          );
        }
        this.#checkAbort();
        this.#checkBudgets([]);
        stream = await this.call();
      }
      this.#checkAbort();
      await this.#finish([{ type: "done", tokensIn: this.#tokensIn, tokensOut: this.#tokensOut }]);
    } catch (err) {
      if (err instanceof BudgetStop) await this.#budgetEnd(err);
      else await this.fail(err);
    }
  }

  /** Ends the turn when the session reached a budget: the calls `open` (not run) get error results. */
  #checkBudgets(open: readonly ToolCall[]): void {
    const hit = this.#usage.reached();
    if (hit) throw new BudgetStop(hit, open);
  }

  /**
   * The run's end at a budget, between two events: each call of the turn
   * that did not run gets an `isError` result (so the model's history stays
   * whole), then `budget_reached` {budget, limit, used} as the terminal event.
   */
  async #budgetEnd(stop: BudgetStop): Promise<void> {
    this.log.publish(
      stop.open.map((call) => ({
        type: "tool_result" as const,
        content: JSON.stringify({
          error: `the tool call was not run: the session reached its ${stop.hit.budget} budget`,
        }),
        toolUseId: call.id,
        isError: true,
      })),
    );
    this.logger.info(stop.hit, "run ended at a budget");
    await this.#finish([
      {
        type: "budget_reached",
        content: JSON.stringify(stop.hit),
        tokensIn: this.#tokensIn,
        tokensOut: this.#tokensOut,
      },
    ]);
  }

  /**
   * Runs the calls in order. Without `decisions` (a fresh model turn), the
   * first call that waits (an `ask` tool's, or a client tool's with valid
   * input) stops it: that call and every later waiting call are returned
   * as pending (the `allow` calls after it wait with them, so the calls
   * still run in the model's order). With `decisions` (a resumed run), a
   * denied call gets an error result with the message, a client call the
   * client's result, and every other call runs.
   */
  async #runCalls(calls: ToolCall[], decisions?: ReadonlyMap<string, ToolDecision>): Promise<ToolCall[]> {
    for (const [i, call] of calls.entries()) {
      this.#checkAbort();
      if (!decisions && this.#waits(call)) return calls.slice(i).filter((c) => this.#waits(c));
      const answer = decisions?.get(call.id);
      if (answer?.decision === "deny") {
        this.log.publish([{ type: "tool_result", content: deniedContent(answer), toolUseId: call.id, isError: true }]);
        continue;
      }
      const client = clientResult(this.#clientTools, call, answer);
      if (client) {
        this.log.publish([
          { type: "tool_result", content: client.content, toolUseId: call.id, isError: client.isError },
        ]);
        continue;
      }
      this.#checkBudgets(calls.slice(i));
      // A tool's effects outlive a crash; so does the record of its call.
      await this.log.flush(this.abort.signal);
      // Live output as tool_output events; the model still gets only the capped result.
      const output = new ToolOutput((content) =>
        this.log.publish([{ type: "tool_output", content, toolUseId: call.id }]),
      );
      let result: ToolResult | undefined;
      this.#toolUseId = call.id;
      // Its sandbox calls (create, exec, files) are the span's children.
      const span = startWorkSpan(`execute_tool ${call.name}`, {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
      });
      try {
        result = await span.run(() =>
          this.#mcp.owns(call.name)
            ? this.#mcp.run(call, this.abort.signal)
            : this.toolbox.run(call, this.#sandbox, this.abort.signal, (stream, data) => output.add(stream, data)),
        );
        if (result.isError) span.set({ "error.type": "tool_error" });
        this.#checkAbort();
        output.end();
      } catch (err) {
        span.fail(err);
        if (this.abort.signal.reason instanceof RunInterrupted) {
          // The call stops (compute's exec cancel: SIGTERM, then SIGKILL after its grace); its
          // output so far stays, and the model is told why the result is missing.
          output.end();
          this.log.publish([
            result
              ? { type: "tool_result", content: result.content, toolUseId: call.id, isError: result.isError }
              : { type: "tool_result", content: TOOL_INTERRUPTED_BY_SEND, toolUseId: call.id, isError: true },
          ]);
        }
        throw err;
      } finally {
        span.end();
        output.close();
      }
      this.#usage.tool(call.name);
      this.log.publish([{ type: "tool_result", content: result.content, toolUseId: call.id, isError: result.isError }]);
    }
    return [];
  }

  /**
   * Whether `call` waits for an answer: a client tool's call whose input
   * its schema accepts (an invalid one gets its error result at once), or
   * a call of an `ask` tool.
   */
  #waits(call: ToolCall): boolean {
    if (this.#clientTools.has(call.name)) return this.#clientTools.check(call) === undefined;
    return this.agent.toolPermissions[call.name] === "ask";
  }

  /** Ends the run with an `error` event (the partial output stays in the log). */
  async fail(err: unknown): Promise<void> {
    const reason = this.abort.signal.aborted ? this.abort.signal.reason : err;
    const message =
      reason instanceof RunCancelled || reason instanceof PlatformError
        ? reason.message
        : "the run failed with an internal error";
    if (reason instanceof RunCancelled) this.logger.info({ reason: message }, "run cancelled");
    else this.logger.warn({ err }, "run failed");
    await this.#finish([{ type: "error", content: message, tokensIn: this.#tokensIn, tokensOut: this.#tokensOut }]);
  }

  /**
   * Stores the terminal events (waiting out a database outage; the lease is
   * renewed meanwhile). When they cannot be stored (the run lost the session,
   * or a shutdown gave up on it), the session's end is the reaper's to write.
   */
  async #finish(events: NewEvent[]): Promise<void> {
    let stored = false;
    try {
      // Whoever sees the terminal event reads the run's whole usage.
      await this.#usage.flush();
      stored = await this.log.finish(events);
      if (!stored)
        this.logger.warn(
          "the run ended without storing its terminal event; it is ended by whoever takes the session over",
        );
    } finally {
      clearInterval(this.#renewal);
      void this.#mcp.close();
      this.runner.finished(this.session.id, this.runId);
    }
    // The session is free: the next queued send, if any (a paused session keeps its queue for after the pause).
    if (stored && events.at(-1)?.type !== "requires_action")
      await this.runner.dispatch(this.auth.orgId, this.session.id);
  }

  async #consume(stream: AsyncIterable<ModelEvent>): Promise<ToolCall[]> {
    const calls: ToolCall[] = [];
    let callIn = 0;
    let callOut = 0;
    const span = this.#modelSpan;
    this.#modelSpan = undefined;
    try {
      for await (const event of stream) {
        this.#checkAbort();
        switch (event.type) {
          case "text":
            if (event.text) this.log.publish([{ type: "text", content: event.text }]);
            break;
          case "tool_use":
            calls.push(event.call);
            this.log.publish([
              {
                type: "tool_use",
                content: toolUseContent(event.call.name, event.call.input),
                toolUseId: event.call.id,
              },
            ]);
            break;
          case "usage":
            // Running totals of this call: the latest replaces the earlier.
            if (event.inputTokens !== undefined) callIn = event.inputTokens;
            if (event.outputTokens !== undefined) callOut = event.outputTokens;
            break;
          case "stop":
            break;
        }
      }
    } catch (err) {
      span?.fail(err);
      throw err;
    } finally {
      this.#tokensIn += callIn;
      this.#tokensOut += callOut;
      this.#usage.model(this.agent.model, callIn, callOut);
      span?.set({ "gen_ai.usage.input_tokens": callIn, "gen_ai.usage.output_tokens": callOut });
      span?.end();
    }
    return calls;
  }

  #checkAbort(): void {
    if (this.abort.signal.aborted) throw this.abort.signal.reason;
  }

  async #renew(): Promise<void> {
    try {
      const { held, cancelRequested, cancelReason } = await this.store.renewRun(
        this.session.id,
        this.runId,
        this.options.leaseMs,
      );
      if (held) this.#renewedAt = Date.now();
      if (!held) this.abort.abort(new RunCancelled("the run lost its hold on the session"));
      else if (cancelRequested)
        this.abort.abort(cancelReason === "interrupt" ? new RunInterrupted() : new RunCancelled());
    } catch (err) {
      this.logger.warn({ err }, "could not renew the run lease");
      // Past its lease the run may be taken over at any moment: it stops and
      // stores its end once the database answers (unless it was taken over).
      if (Date.now() - this.#renewedAt > this.options.leaseMs) {
        this.abort.abort(
          PlatformError.unavailable(
            "the run was interrupted: the database was unreachable for longer than the run's lease",
          ),
        );
      }
    }
  }
}

/** What the model gets for a call a person denied. */
function deniedContent(answer: ToolDecision): string {
  return JSON.stringify({
    error: "the user denied this tool call",
    ...(answer.message ? { message: answer.message } : {}),
  });
}

/** The reason a run stops when its log stops taking events. */
function stopReason(failure: LogFailure): Error {
  if (failure.kind === "lost") return new RunCancelled("the run lost its hold on the session");
  return PlatformError.internal("the run's events could not be stored");
}
