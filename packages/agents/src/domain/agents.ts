import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { readWholeLog } from "./log-pages.ts";
import type { Agent, AuthContext, MessageInput, Page, Session, SessionEvent } from "./model.ts";
import type { EventFeed, Models, Runs, Sandboxes } from "./ports.ts";
import type { AgentChanges, Store } from "./store.ts";
import { listLimit, requireText, requireUuid, validateMessages } from "./validate.ts";

export type AgentInput = { name: string; slug: string; model: string; systemPrompt: string };
/** An update: the fields present are set, the others left as they are. */
export type AgentUpdate = { name?: string; slug?: string; model?: string; systemPrompt?: string };

const SYSTEM_PROMPT_MAX = 64 * 1024;

/**
 * The agents service's use cases. Every call carries the caller's
 * AuthContext; rows of other orgs are indistinguishable from missing ones.
 */
export class AgentsDomain {
  constructor(
    private readonly store: Store,
    private readonly runner: Runs,
    private readonly followers: EventFeed,
    private readonly sandboxes: Sandboxes,
    private readonly models: Models,
  ) {}

  async createAgent(auth: AuthContext, input: AgentInput): Promise<Agent> {
    const name = requireText("name", input.name);
    const slug = requireText("slug", input.slug, 128);
    const model = requireText("model", input.model);
    this.models.check(model);
    if (input.systemPrompt.length > SYSTEM_PROMPT_MAX)
      throw PlatformError.invalidArgument(`systemPrompt is longer than ${SYSTEM_PROMPT_MAX} characters`);
    return this.store.createAgent({ orgId: auth.orgId, name, slug, model, systemPrompt: input.systemPrompt });
  }

  async listAgents(auth: AuthContext, limit: number | undefined, after: string): Promise<Page<Agent>> {
    return this.store.listAgents(auth.orgId, listLimit(limit), after === "" ? undefined : after);
  }

  async getAgent(auth: AuthContext, id: string): Promise<Agent> {
    const agent = await this.store.getAgent(auth.orgId, requireUuid("id", id));
    if (!agent) throw PlatformError.notFound("agent not found");
    return agent;
  }

  async updateAgent(auth: AuthContext, id: string, update: AgentUpdate): Promise<Agent> {
    const agentId = requireUuid("id", id);
    // The same rules as on create, for each field that is present.
    const changes: AgentChanges = {};
    if (update.name !== undefined) changes.name = requireText("name", update.name);
    if (update.slug !== undefined) changes.slug = requireText("slug", update.slug, 128);
    if (update.model !== undefined) {
      changes.model = requireText("model", update.model);
      this.models.check(changes.model);
    }
    if (update.systemPrompt !== undefined) {
      if (update.systemPrompt.length > SYSTEM_PROMPT_MAX)
        throw PlatformError.invalidArgument(`systemPrompt is longer than ${SYSTEM_PROMPT_MAX} characters`);
      changes.systemPrompt = update.systemPrompt;
    }
    const agent =
      Object.keys(changes).length === 0
        ? await this.store.getAgent(auth.orgId, agentId)
        : await this.store.updateAgent(auth.orgId, agentId, changes);
    if (!agent) throw PlatformError.notFound("agent not found");
    return agent;
  }

  /** Deleted agents disappear; their sessions stay readable (see the README). */
  async deleteAgent(auth: AuthContext, id: string): Promise<void> {
    if (!(await this.store.deleteAgent(auth.orgId, requireUuid("id", id))))
      throw PlatformError.notFound("agent not found");
  }

  async listSessions(
    auth: AuthContext,
    limit: number | undefined,
    after: string,
    agentId: string,
  ): Promise<Page<Session>> {
    const pageSize = listLimit(limit);
    const agent = agentId === "" ? undefined : requireUuid("agentId", agentId);
    return this.store.listSessions(auth.orgId, pageSize, { after: after === "" ? undefined : after, agentId: agent });
  }

  /**
   * Deletes a session: cancels its run (and waits for the run to let go),
   * destroys its sandbox, then removes the session and its log. A compute
   * failure answers 503 with the session intact, so the call can be retried.
   */
  async deleteSession(auth: AuthContext, id: string): Promise<void> {
    const sessionId = requireUuid("id", id);
    let destroyed: string | undefined;
    // A run may start between the checks below and the delete; each round
    // cancels it again. Three rounds need three such races in a row.
    for (let round = 0; round < 3; round++) {
      const session = await this.#session(auth, sessionId);
      if (session.status === "running") {
        await this.runner.cancel(auth.orgId, sessionId);
        await this.#released(auth, sessionId);
      }
      if (session.sandboxId && session.sandboxId !== destroyed) {
        await this.sandboxes.destroy(session.sandboxId);
        destroyed = session.sandboxId;
      }
      const result = await this.store.deleteSession(auth.orgId, sessionId);
      if (!result.deleted && !result.busy) throw PlatformError.notFound("session not found");
      if (!result.deleted) continue;
      // A run that slipped in before the delete made a new sandbox.
      if (result.sandboxId && result.sandboxId !== destroyed) await this.sandboxes.destroy(result.sandboxId);
      return;
    }
    throw new PlatformError(Code.Aborted, "aborted", `session ${sessionId} keeps getting new runs; try again`);
  }

  /** Waits until no live run holds the session (a cancelled run ends within a lease). */
  async #released(auth: AuthContext, sessionId: string): Promise<void> {
    const deadline = Date.now() + this.runner.leaseMs + 1000;
    while (Date.now() < deadline) {
      const session = await this.store.getSession(auth.orgId, sessionId);
      if (session?.status !== "running") return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async createSession(auth: AuthContext, agentId: string): Promise<Session> {
    const agent = await this.store.getAgent(auth.orgId, requireUuid("agentId", agentId));
    if (!agent) throw PlatformError.notFound("agent not found");
    return this.store.createSession(auth.orgId, agent.id);
  }

  async getSession(auth: AuthContext, id: string): Promise<{ session: Session; events: SessionEvent[] }> {
    const read = await readWholeLog(this.store, auth.orgId, requireUuid("id", id));
    if (!read) throw PlatformError.notFound("session not found");
    return read;
  }

  /**
   * Appends the messages and starts a run. Throws before the stream starts
   * (invalid input, 404, 409 for a busy session, 503 for an unreachable
   * model); then yields the run's events until its terminal one. Stopping
   * the iteration (client gone) does not stop the run.
   */
  async sendMessages(
    auth: AuthContext,
    id: string,
    messages: MessageInput[],
    options: { signal?: AbortSignal; logger?: Logger } = {},
  ): Promise<AsyncIterable<SessionEvent>> {
    const sessionId = requireUuid("id", id);
    validateMessages(messages);
    const session = await this.#session(auth, sessionId);
    const agent = await this.store.getAgent(auth.orgId, session.agentId);
    if (!agent) throw PlatformError.notFound("agent not found");
    const started = await this.runner.start(auth, agent, session.id, messages, options.logger);
    return this.followers.follow(auth.orgId, session.id, started.lastMessageSeq, {
      signal: options.signal,
      runId: started.runId,
    });
  }

  /** Rejoins a session's stream after `after` (the last seq the client saw). */
  async streamEvents(
    auth: AuthContext,
    id: string,
    after: number,
    signal?: AbortSignal,
  ): Promise<AsyncIterable<SessionEvent>> {
    const sessionId = requireUuid("id", id);
    if (!Number.isSafeInteger(after) || after < 0)
      throw PlatformError.invalidArgument("after must be a sequence number");
    // A missing session fails the stream before its first event (a 404 before the SSE response).
    return this.followers.follow(auth.orgId, sessionId, after, { signal });
  }

  async cancelRun(auth: AuthContext, id: string): Promise<boolean> {
    const session = await this.#session(auth, id);
    return this.runner.cancel(auth.orgId, session.id);
  }

  async #session(auth: AuthContext, id: string): Promise<Session> {
    const session = await this.store.getSession(auth.orgId, requireUuid("id", id));
    if (!session) throw PlatformError.notFound("session not found");
    return session;
  }
}
