import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import type { Followers } from "../runs/follow.ts";
import type { Runner } from "../runs/runner.ts";
import type { Agent, AuthContext, MessageInput, Page, Session, SessionEvent } from "./model.ts";
import type { Store } from "./store.ts";
import { listLimit, requireText, requireUuid, validateMessages } from "./validate.ts";

export type AgentInput = { name: string; slug: string; model: string; systemPrompt: string };

const SYSTEM_PROMPT_MAX = 64 * 1024;

/**
 * The agents service's use cases. Every call carries the caller's
 * AuthContext; rows of other orgs are indistinguishable from missing ones.
 */
export class AgentsDomain {
  constructor(
    private readonly store: Store,
    private readonly runner: Runner,
    private readonly followers: Followers,
  ) {}

  async createAgent(auth: AuthContext, input: AgentInput): Promise<Agent> {
    const name = requireText("name", input.name);
    const slug = requireText("slug", input.slug, 128);
    const model = requireText("model", input.model);
    if (input.systemPrompt.length > SYSTEM_PROMPT_MAX) throw PlatformError.invalidArgument(`systemPrompt is longer than ${SYSTEM_PROMPT_MAX} characters`);
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

  async createSession(auth: AuthContext, agentId: string): Promise<Session> {
    const agent = await this.store.getAgent(auth.orgId, requireUuid("agentId", agentId));
    if (!agent) throw PlatformError.notFound("agent not found");
    return this.store.createSession(auth.orgId, agent.id);
  }

  async getSession(auth: AuthContext, id: string): Promise<{ session: Session; events: SessionEvent[] }> {
    const read = await this.store.readLog(auth.orgId, requireUuid("id", id), 0);
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
    return this.followers.follow(auth.orgId, session.id, started.lastMessageSeq, { signal: options.signal, runId: started.runId });
  }

  /** Rejoins a session's stream after `after` (the last seq the client saw). */
  async streamEvents(auth: AuthContext, id: string, after: number, signal?: AbortSignal): Promise<AsyncIterable<SessionEvent>> {
    const sessionId = requireUuid("id", id);
    if (!Number.isSafeInteger(after) || after < 0) throw PlatformError.invalidArgument("after must be a sequence number");
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
