import { Code, PlatformError } from "@platform/errors";
import { type NetworkPolicy, validateNetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import { type ClientToolInput, mergeClientTools, validateClientTools } from "./client-tools.ts";
import { readLogPage } from "./log-pages.ts";
import { type HeaderSealer, type McpServerInput, mergeMcpServers, validateMcpServers } from "./mcp-servers.ts";
import type {
  Agent,
  AuthContext,
  MessageInput,
  Page,
  PendingCall,
  Session,
  SessionEvent,
  ToolDecision,
  ToolPermissions,
  Waiting,
} from "./model.ts";
import type { EventFeed, Models, Runs, Sandboxes } from "./ports.ts";
import type { AgentChanges, Store } from "./store.ts";
import { type BudgetsInput, mergeBudgets, validateBudgets } from "./usage.ts";

/** A network policy as a caller gives it (agents.v1.AgentNetworkPolicyInput). */
export type NetworkPolicyInput = {
  allowAll?: boolean;
  allowedDomains?: string[];
  allowedCidrs?: { cidr: string; ports?: number[] }[];
};

/** Validated (entries named on error, compute's rules); an empty policy is none. */
function agentNetworkPolicy(input: NetworkPolicyInput | undefined): NetworkPolicy | undefined {
  if (!input) return undefined;
  const policy = validateNetworkPolicy(input);
  return policy.allowAll || policy.allowedDomains.length > 0 || policy.allowedCidrs.length > 0 ? policy : undefined;
}

import {
  type DecisionInput,
  listLimit,
  MAX_TOOL_PERMISSIONS,
  requireText,
  requireUuid,
  validateDecisions,
  validateMessages,
  validateSendMode,
  validateToolPermissions,
} from "./validate.ts";

export type AgentInput = {
  name: string;
  slug: string;
  model: string;
  systemPrompt: string;
  toolPermissions?: Readonly<Record<string, string>>;
  /** MCP servers; on update merged by name (an empty url removes one). */
  mcpServers?: readonly McpServerInput[];
  /** On update merged by name; an entry with an empty inputSchema removes its tool. */
  clientTools?: readonly ClientToolInput[];
  /** Budgets (domain/usage.ts): on create absent or 0 is no limit; on update merged, 0 removing a limit. */
  budgets?: BudgetsInput;
  /** Create: absent or empty is no network. Update: present replaces it (empty: none), absent keeps it. */
  networkPolicy?: NetworkPolicyInput;
  /** compute's sandbox image; "" (or absent on create) its default; on update absent keeps it. */
  image?: string;
};
/** An update: the fields present are set, the others left as they are; tool policies are merged. */
export type AgentUpdate = Partial<AgentInput>;

/** The outcome of answering a paused run's calls. */
export type DecisionsOutcome = {
  /** Calls that still wait for an answer. */
  pending: PendingCall[];
  /** Whether these answers completed the set and the run resumed. */
  resumed: boolean;
  /** The seq of the `requires_action` the answers were for: the resumed run's events follow it. */
  after: number;
};

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
    /** Seals MCP servers' header values; absent (no AGENTS_SECRETS_KEY), servers with headers are refused. */
    private readonly secrets?: HeaderSealer,
  ) {}

  /**
   * An agent's image must be one compute can run (issue 22): compute lists
   * its images (the local driver's store, and `host`); a driver taking any
   * name (a registry's) or a compute without the list leaves it unchecked.
   * "" is compute's default. INVALID_ARGUMENT names the images there are.
   */
  private async checkImage(image: string): Promise<string> {
    if (image === "") return "";
    if (image.length > 255 || !/^[\x21-\x7e]+$/.test(image))
      throw PlatformError.invalidArgument("image must be at most 255 printable ASCII characters without spaces");
    const known = await this.sandboxes.images?.();
    if (!known || known.anyImage || known.names.includes(image)) return image;
    throw PlatformError.invalidArgument(
      `image: unknown image ${JSON.stringify(image)}; available: ${known.names.join(", ")}`,
      "image_not_found",
    );
  }

  async createAgent(auth: AuthContext, input: AgentInput): Promise<Agent> {
    const name = requireText("name", input.name);
    const slug = requireText("slug", input.slug, 128);
    const model = requireText("model", input.model);
    this.models.check(model);
    if (input.systemPrompt.length > SYSTEM_PROMPT_MAX)
      throw PlatformError.invalidArgument(`systemPrompt is longer than ${SYSTEM_PROMPT_MAX} characters`);
    const toolPermissions = validateToolPermissions(input.toolPermissions ?? {});
    const mcpServers = validateMcpServers(input.mcpServers ?? [], auth.orgId, this.secrets);
    const clientTools = validateClientTools(input.clientTools ?? []);
    const budgets = mergeBudgets({}, validateBudgets(input.budgets));
    const networkPolicy = agentNetworkPolicy(input.networkPolicy);
    const image = await this.checkImage(input.image ?? "");
    return this.store.createAgent({
      budgets,
      ...(networkPolicy ? { networkPolicy } : {}),
      ...(image ? { image } : {}),
      orgId: auth.orgId,
      name,
      slug,
      model,
      systemPrompt: input.systemPrompt,
      mcpServers,
      toolPermissions,
      clientTools,
    });
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
    if (update.toolPermissions !== undefined && Object.keys(update.toolPermissions).length > 0) {
      changes.toolPermissions = validateToolPermissions(update.toolPermissions);
      const current = await this.store.getAgent(auth.orgId, agentId);
      if (!current) throw PlatformError.notFound("agent not found");
      const merged: ToolPermissions = { ...current.toolPermissions, ...changes.toolPermissions };
      if (Object.keys(merged).length > MAX_TOOL_PERMISSIONS)
        throw PlatformError.invalidArgument(
          `toolPermissions would have more than ${MAX_TOOL_PERMISSIONS} entries; set "allow" on tools already named instead of naming new ones`,
        );
    }
    if (update.clientTools !== undefined && update.clientTools.length > 0) {
      const current = await this.store.getAgent(auth.orgId, agentId);
      if (!current) throw PlatformError.notFound("agent not found");
      changes.clientTools = mergeClientTools(current.clientTools, update.clientTools);
    }
    if (update.mcpServers !== undefined && update.mcpServers.length > 0) {
      const current = await this.store.getAgent(auth.orgId, agentId);
      if (!current) throw PlatformError.notFound("agent not found");
      changes.mcpServers = mergeMcpServers(current.mcpServers, update.mcpServers, auth.orgId, this.secrets);
    }
    if (update.budgets !== undefined) {
      const given = validateBudgets(update.budgets);
      if (Object.keys(given).length > 0) {
        const current = await this.store.getAgent(auth.orgId, agentId);
        if (!current) throw PlatformError.notFound("agent not found");
        changes.budgets = mergeBudgets(current.budgets, given);
      }
    }
    if (update.networkPolicy !== undefined) changes.networkPolicy = agentNetworkPolicy(update.networkPolicy) ?? null;
    if (update.image !== undefined) changes.image = await this.checkImage(update.image);
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

  async createSession(auth: AuthContext, agentId: string, budgets?: BudgetsInput): Promise<Session> {
    const own = mergeBudgets({}, validateBudgets(budgets));
    const agent = await this.store.getAgent(auth.orgId, requireUuid("agentId", agentId));
    if (!agent) throw PlatformError.notFound("agent not found");
    return this.store.createSession(auth.orgId, agent.id, own);
  }

  /**
   * The session and one page of its log (see readLogPage): the first
   * SESSION_PAGE events by default, `next` naming the rest.
   */
  async getSession(
    auth: AuthContext,
    id: string,
    page: { pageSize?: number; pageToken?: string } = {},
  ): Promise<{ session: Session; events: SessionEvent[]; next?: string }> {
    const read = await readLogPage(this.store, auth.orgId, requireUuid("id", id), page);
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
    options: { signal?: AbortSignal; logger?: Logger; mode?: string } = {},
  ): Promise<AsyncIterable<SessionEvent>> {
    const sessionId = requireUuid("id", id);
    validateMessages(messages);
    const mode = validateSendMode(options.mode ?? "");
    const session = await this.#session(auth, sessionId);
    const agent = await this.store.getAgent(auth.orgId, session.agentId);
    if (!agent) throw PlatformError.notFound("agent not found");
    const outcome = await this.runner.send(auth, agent, session.id, messages, mode, options.logger);
    if ("queued" in outcome)
      // Its own `message_queued` event first, then the run that takes it (see the README).
      return this.followers.follow(auth.orgId, session.id, outcome.queued.seq - 1, {
        signal: options.signal,
        queuedSeq: outcome.queued.seq,
      });
    const started = outcome.started;
    return this.followers.follow(auth.orgId, session.id, started.lastMessageSeq, {
      signal: options.signal,
      runId: started.runId,
    });
  }

  /** The seqs of the session's queued sends no run has taken yet, the next first. */
  async queuedSends(auth: AuthContext, id: string): Promise<number[]> {
    const session = await this.#session(auth, id);
    return (await this.store.queuedSends(session.id)).map((q) => q.seq);
  }

  /**
   * Records answers to the calls the session's run paused on; once every
   * call has one, the run resumes (detached, as a send's run is). A call
   * that is not pending is `aborted` (409) with a reason, and nothing of
   * the request is recorded. An empty list only resumes a session whose
   * calls are all answered but that did not resume (its server stopped in
   * between).
   */
  async submitToolDecisions(
    auth: AuthContext,
    id: string,
    input: readonly DecisionInput[],
    options: { logger?: Logger } = {},
  ): Promise<DecisionsOutcome> {
    const sessionId = requireUuid("id", id);
    const decisions = input.length === 0 ? [] : validateDecisions(input);
    const session = await this.#session(auth, sessionId);
    const waiting = await this.store.waiting(auth.orgId, sessionId);
    if (!waiting || session.status === "running")
      throw conflict("no_tool_calls_pending", `session ${sessionId} has no tool calls waiting for an answer`);
    const agent = await this.store.getAgent(auth.orgId, session.agentId);
    if (!agent) throw PlatformError.notFound("agent not found");
    const pendingIds = new Set(waiting.calls.map((c) => c.toolUseId));
    for (const d of decisions) {
      if (!pendingIds.has(d.toolUseId))
        throw conflict(
          "tool_call_unknown",
          `tool call ${d.toolUseId} is not one the session's run waits on (pending: ${[...pendingIds].join(", ")})`,
        );
      if (waiting.decisions.has(d.toolUseId))
        throw conflict("tool_call_already_decided", `tool call ${d.toolUseId} was already answered`);
      checkAnswerKind(waiting, d);
    }
    const recorded = await this.store.recordDecisions(sessionId, waiting.seq, decisions);
    if (recorded === "duplicate")
      throw conflict("tool_call_already_decided", "one of the tool calls was answered by another request meanwhile");
    if (recorded === "moved")
      throw conflict("no_tool_calls_pending", `session ${sessionId} no longer waits on these tool calls`);
    const now = await this.store.waiting(auth.orgId, sessionId);
    if (now?.seq !== waiting.seq) return { pending: [], resumed: false, after: waiting.seq };
    const pending = stillPending(now);
    if (pending.length > 0) return { pending, resumed: false, after: waiting.seq };
    const started = await this.runner.resume(auth, agent, sessionId, now, options.logger);
    return { pending: [], resumed: started !== undefined, after: waiting.seq };
  }

  /** The calls the session's paused run waits on that have no answer yet (none when it does not wait). */
  async pendingToolCalls(auth: AuthContext, id: string): Promise<PendingCall[]> {
    const waiting = await this.store.waiting(auth.orgId, requireUuid("id", id));
    return waiting ? stillPending(waiting) : [];
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

/** A client tool's call is answered with its result (or denied); any other call with allow or deny. */
function checkAnswerKind(waiting: Waiting, d: ToolDecision): void {
  const call = waiting.calls.find((c) => c.toolUseId === d.toolUseId);
  if (call?.kind === "client" && d.decision === "allow")
    throw conflict(
      "client_tool_needs_result",
      `tool call ${d.toolUseId} is a call of the client tool ${call.name}: answer it with its result (result.content, result.isError) or deny it`,
    );
  if (call?.kind !== "client" && d.decision === "result")
    throw conflict(
      "tool_call_not_client",
      `tool call ${d.toolUseId} (${call?.name}) waits for allow or deny: a result answers only a client tool's call`,
    );
}

function stillPending(waiting: Waiting): PendingCall[] {
  return waiting.calls.filter((c) => !waiting.decisions.has(c.toolUseId));
}

/** 409 with the reason a client acts on (gRPC: ErrorInfo.reason; REST: `aborted` and the message). */
function conflict(reason: string, message: string): PlatformError {
  return new PlatformError(Code.Aborted, reason, message);
}
