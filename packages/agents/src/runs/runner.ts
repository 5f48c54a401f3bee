import { randomUUID } from "node:crypto";
import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { Agent, AuthContext, MessageInput, NewEvent, Session } from "../domain/model.ts";
import type { Sandboxes } from "../domain/ports.ts";
import type { Store } from "../domain/store.ts";
import type { ModelEvent, ModelRequest, ToolCall } from "../providers/provider.ts";
import type { ProviderRegistry } from "../providers/registry.ts";
import type { Toolbox, ToolResult } from "../tools/toolbox.ts";
import { historyOf, toolUseContent } from "./history.ts";
import type { EventHub } from "./hub.ts";
import { RunLog } from "./run-log.ts";
import { ToolOutput } from "./tool-output.ts";

export type RunnerOptions = {
  /** A run's hold on its session; renewed while it runs, so a crashed replica's run lapses. */
  leaseMs: number;
  /** Model calls in one run (each tool round is one more); past it the run ends with an error. */
  maxModelCalls: number;
  maxTokens: number;
  /** How long a published event may wait to be stored (batched with the ones after it). */
  flushMs: number;
};

export type StartedRun = { runId: string; session: Session; lastMessageSeq: number };

type Active = { runId: string; abort: AbortController };

/**
 * Runs turns: takes the session (one run at a time), appends the client's
 * messages, calls the model, dispatches tool calls and publishes every
 * produced event at once, storing it in the log within `flushMs` (see
 * RunLog). A run is detached from the request
 * that started it: it goes on when the client disconnects and ends only with
 * `done`, `error` or an explicit cancel.
 */
export class Runner {
  readonly #active = new Map<string, Active>();
  readonly #running = new Set<Promise<void>>();
  #stopping = false;

  constructor(
    private readonly store: Store,
    private readonly hub: EventHub,
    private readonly providers: ProviderRegistry,
    private readonly toolbox: Toolbox,
    private readonly sandboxes: Sandboxes,
    private readonly options: RunnerOptions,
    private readonly logger: Logger,
  ) {}

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
  ): Promise<StartedRun> {
    if (this.#stopping) throw PlatformError.unavailable("the service is shutting down; retry on another replica");
    const runId = randomUUID();
    // The run outlives its request; its log lines keep the request's ids.
    const logger = (requestLogger ?? this.logger).child({ sessionId, runId });
    const taken = await this.store.acquireRun(auth.orgId, sessionId, runId, this.options.leaseMs);
    if (!taken.ok) {
      if ("missing" in taken) throw PlatformError.notFound("session not found");
      throw new PlatformError(Code.Aborted, "aborted", `session ${sessionId} has an active run ${taken.activeRunId}; wait for it to end or cancel it`, {
        activeRunId: taken.activeRunId,
      });
    }
    const abort = new AbortController();
    this.#active.set(sessionId, { runId, abort });
    const run = new Run(this, this.store, this.hub, this.providers, this.toolbox, this.sandboxes, this.options, logger, {
      auth,
      agent,
      session: taken.session,
      runId,
      abort,
    });
    const appended = run.log.publish(
      messages.map((m) => ({ type: m.role as NewEvent["type"], content: m.content, toolUseId: m.toolUseId, isError: m.isError })),
    );
    let first: AsyncIterable<ModelEvent>;
    try {
      first = await run.call();
    } catch (err) {
      await run.fail(err).catch(() => {});
      if (err instanceof PlatformError) throw err;
      // Cancelled or shut down before the model answered.
      if (abort.signal.aborted) throw PlatformError.unavailable(abort.signal.reason instanceof Error ? abort.signal.reason.message : "the run was cancelled");
      throw PlatformError.from(err);
    }
    const done = run.continue(first).finally(() => {
      this.#running.delete(done);
    });
    this.#running.add(done);
    logger.info({ agentId: agent.id, model: agent.model }, "run started");
    return { runId, session: taken.session, lastMessageSeq: appended.at(-1)!.seq };
  }

  /** How long a dead replica's run can hold its session. */
  get leaseMs(): number {
    return this.options.leaseMs;
  }

  /** Cancels the session's active run, here or (through the database flag) on another replica. */
  async cancel(orgId: string, sessionId: string): Promise<boolean> {
    const runId = await this.store.requestCancel(orgId, sessionId);
    if (!runId) return false;
    const local = this.#active.get(sessionId);
    if (local?.runId === runId) local.abort.abort(new RunCancelled());
    return true;
  }

  /** Shutdown: cancels every local run and waits for their terminal events. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const { abort } of this.#active.values()) abort.abort(new RunCancelled("the server is shutting down"));
    await Promise.allSettled([...this.#running]);
  }

  /** Resolves when every run started so far has ended (tests). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  finished(sessionId: string, runId: string): void {
    if (this.#active.get(sessionId)?.runId === runId) this.#active.delete(sessionId);
  }
}

class RunCancelled extends Error {
  constructor(message = "the run was cancelled") {
    super(message);
  }
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
  #sandboxId: string | undefined;
  /** Whether the session's sandbox was checked (or created) in this run. */
  #sandboxChecked = false;
  #renewal: NodeJS.Timeout | undefined;
  readonly log: RunLog;

  constructor(
    private readonly runner: Runner,
    private readonly store: Store,
    hub: EventHub,
    private readonly providers: ProviderRegistry,
    private readonly toolbox: Toolbox,
    private readonly sandboxes: Sandboxes,
    private readonly options: RunnerOptions,
    private readonly logger: Logger,
    context: { auth: AuthContext; agent: Agent; session: Session; runId: string; abort: AbortController },
  ) {
    this.auth = context.auth;
    this.agent = context.agent;
    this.session = context.session;
    this.runId = context.runId;
    this.abort = context.abort;
    this.#sandboxId = this.session.sandboxId;
    this.#renewal = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.options.leaseMs / 3)));
    this.#renewal.unref();
    this.log = new RunLog(store, hub, this.session.id, this.runId, this.session.lastSeq, options.flushMs, logger);
  }

  /** One model call over the whole log so far. */
  async call(): Promise<AsyncIterable<ModelEvent>> {
    this.#calls++;
    const { provider, model } = this.providers.resolve(this.agent.model);
    await this.log.flush();
    const log = await this.store.listEvents(this.auth.orgId, this.session.id);
    const request: ModelRequest = {
      model,
      system: this.agent.systemPrompt,
      messages: historyOf(log),
      tools: this.toolbox.specs,
      maxTokens: this.options.maxTokens,
    };
    return provider.start(request, this.abort.signal);
  }

  /** Drives the run to its terminal event. Never throws. */
  async continue(first: AsyncIterable<ModelEvent>): Promise<void> {
    let stream: AsyncIterable<ModelEvent> | undefined = first;
    try {
      while (stream) {
        const calls = await this.#consume(stream);
        stream = undefined;
        if (calls.length === 0) break;
        for (const call of calls) {
          this.#checkAbort();
          // A tool's effects outlive a crash; so does the record of its call.
          await this.log.flush();
          // Live output as tool_output events; the model still gets only the capped result.
          const output = new ToolOutput((content) => this.log.publish([{ type: "tool_output", content, toolUseId: call.id }]));
          let result: ToolResult;
          try {
            result = await this.toolbox.run(call, () => this.#sandbox(), this.abort.signal, (stream, data) => output.add(stream, data));
            this.#checkAbort();
            output.end();
          } finally {
            output.close();
          }
          this.log.publish([{ type: "tool_result", content: result.content, toolUseId: call.id, isError: result.isError }]);
        }
        if (this.#calls >= this.options.maxModelCalls) {
          throw PlatformError.failedPrecondition(`the run reached its limit of ${this.options.maxModelCalls} model calls`);
        }
        this.#checkAbort();
        stream = await this.call();
      }
      this.#checkAbort();
      await this.#finish([{ type: "done", tokensIn: this.#tokensIn, tokensOut: this.#tokensOut }]);
    } catch (err) {
      await this.fail(err);
    }
  }

  /** Ends the run with an `error` event (the partial output stays in the log). */
  async fail(err: unknown): Promise<void> {
    const reason = this.abort.signal.aborted ? this.abort.signal.reason : err;
    const message =
      reason instanceof RunCancelled || reason instanceof PlatformError ? reason.message : "the run failed with an internal error";
    if (reason instanceof RunCancelled) this.logger.info({ reason: message }, "run cancelled");
    else this.logger.warn({ err }, "run failed");
    await this.#finish([{ type: "error", content: message, tokensIn: this.#tokensIn, tokensOut: this.#tokensOut }]);
  }

  async #finish(events: NewEvent[]): Promise<void> {
    clearInterval(this.#renewal);
    try {
      await this.log.finish(events);
      this.runner.finished(this.session.id, this.runId);
    } catch (err) {
      this.logger.error({ err }, "could not append the terminal event");
      await this.store.releaseRun(this.session.id, this.runId).catch((e) => this.logger.error({ err: e }, "could not release the run"));
      this.runner.finished(this.session.id, this.runId);
    }
  }

  async #consume(stream: AsyncIterable<ModelEvent>): Promise<ToolCall[]> {
    const calls: ToolCall[] = [];
    let callIn = 0;
    let callOut = 0;
    try {
      for await (const event of stream) {
        this.#checkAbort();
        switch (event.type) {
          case "text":
            if (event.text) this.log.publish([{ type: "text", content: event.text }]);
            break;
          case "tool_use":
            calls.push(event.call);
            this.log.publish([{ type: "tool_use", content: toolUseContent(event.call.name, event.call.input), toolUseId: event.call.id }]);
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
    } finally {
      this.#tokensIn += callIn;
      this.#tokensOut += callOut;
    }
    return calls;
  }

  async #sandbox(): Promise<string> {
    if (this.#sandboxId && !this.#sandboxChecked) {
      this.#sandboxChecked = true;
      if (!(await this.sandboxes.usable(this.#sandboxId))) this.#sandboxId = undefined;
    }
    if (!this.#sandboxId) {
      this.#sandboxChecked = true;
      const id = await this.sandboxes.create(this.auth.orgId, this.session.id);
      await this.store.setSandbox(this.session.id, id);
      this.#sandboxId = id;
    }
    return this.#sandboxId;
  }

  #checkAbort(): void {
    if (this.abort.signal.aborted) throw this.abort.signal.reason;
  }

  async #renew(): Promise<void> {
    try {
      const { held, cancelRequested } = await this.store.renewRun(this.session.id, this.runId, this.options.leaseMs);
      if (!held) this.abort.abort(new RunCancelled("the run lost its hold on the session"));
      else if (cancelRequested) this.abort.abort(new RunCancelled());
    } catch (err) {
      this.logger.warn({ err }, "could not renew the run lease");
    }
  }
}
