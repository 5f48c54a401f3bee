import { randomUUID } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import type { PendingToolCallSchema } from "@platform/gen/agents/v1/agents_pb";
import type { InvokeEventSchema, InvokeRequest } from "@platform/gen/runtime/v1/runtime_pb";
import { acceptedId, fromConnectError, isPlatformStatus, openStream } from "@platform/rpc";
import type { Logger } from "pino";
import { type CallIdentity, Metadata } from "../metadata.ts";
import { isCallerFault } from "../caller-fault.ts";
import type { AgentEvent, AgentsPort } from "./agents-port.ts";

type InvokeEventInit = MessageInitShape<typeof InvokeEventSchema>;

export interface WorkerInvokeDeps {
  /** This worker's tenant and org (TENANT_ID, ORG_ID of its environment). */
  tenantId: string;
  orgId: string;
  agents: AgentsPort;
  logger?: Logger;
}

/**
 * RuntimeService.Invoke of the tenant worker: checks the tenant metadata
 * against the worker's own tenant, forwards to the agents service with the
 * caller's credential and context, and maps the agents events:
 * text → text_chunk, done → turn_done, error → error, requires_action →
 * requires_action (the stream ends after each of the last three). tool_use and tool_result have no runtime event and are
 * dropped, as are the log-only message types.
 *
 * With messages it calls SendMessages. Without, it rejoins the session's
 * running turn (GetSession + StreamEvents after the last terminal event);
 * when no turn is running it answers turn_done at once.
 */
export function workerInvoke(deps: WorkerInvokeDeps) {
  const tenantId = deps.tenantId.toLowerCase();
  const orgId = deps.orgId.toLowerCase();
  return function invoke(req: InvokeRequest, ctx: HandlerContext): AsyncIterable<InvokeEventInit> {
    return new InvokeRelay(deps, tenantId, orgId, req, ctx);
  };
}

/**
 * One Invoke's events, mapped from the agents stream as they are read: an
 * iterator object rather than an async generator, so an event costs the
 * source's read and one reaction here, where a generator's for-await and
 * yield cost two more promises and their turns, on the path of every
 * streamed token (packages/bench/ANALYSIS.md, per-token latency). The call
 * is checked and the agents call made on the first read, as the generator
 * did; after a terminal event (or the end of the agents stream) the stream
 * is done.
 */
class InvokeRelay implements AsyncIterableIterator<InvokeEventInit> {
  #events: AsyncIterator<AgentEvent> | undefined;
  #rejoin = false;
  #log: Logger | undefined;
  #done = false;

  constructor(
    private readonly deps: WorkerInvokeDeps,
    private readonly tenantId: string,
    private readonly orgId: string,
    private readonly req: InvokeRequest,
    private readonly ctx: HandlerContext,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<InvokeEventInit>> {
    if (this.#done) return Promise.resolve({ done: true, value: undefined });
    let events = this.#events;
    if (!events) {
      try {
        events = this.#open();
      } catch (e) {
        this.#done = true;
        return Promise.reject(e);
      }
    }
    return this.#read(events);
  }

  async return(): Promise<IteratorResult<InvokeEventInit>> {
    this.#done = true;
    await this.#events?.return?.();
    return { done: true, value: undefined };
  }

  /** Checks the call and starts the agents call (the first read). */
  #open(): AsyncIterator<AgentEvent> {
    const { req, ctx, deps } = this;
    const call = callIdentity(req, ctx.requestHeader);
    if (call.tenantId.toLowerCase() !== this.tenantId || call.orgId.toLowerCase() !== this.orgId) {
      throw PlatformError.unauthenticated("tenant metadata does not match this worker");
    }
    if (!req.sessionId) throw PlatformError.invalidArgument("session_id is required");
    this.#log = deps.logger?.child({ requestId: call.requestId, traceId: call.traceId, sessionId: req.sessionId });
    this.#rejoin = req.messages.length === 0;
    // The agents service accepted the call: so does this worker (the router
    // sends its caller the SSE headers on this, not on the first text).
    const accepted = () => openStream(ctx);
    const events: AsyncIterable<AgentEvent> = this.#rejoin
      ? deps.agents.rejoin(req.sessionId, call, ctx.signal, accepted)
      : deps.agents.sendMessages(req.sessionId, req.messages, call, ctx.signal, accepted);
    this.#events = events[Symbol.asyncIterator]();
    return this.#events;
  }

  #read(events: AsyncIterator<AgentEvent>): Promise<IteratorResult<InvokeEventInit>> {
    let read: Promise<IteratorResult<AgentEvent>>;
    try {
      read = events.next();
    } catch (e) {
      return Promise.reject(this.#failed(e));
    }
    return read.then(
      (r) => this.#relay(r, events),
      (e: unknown) => {
        throw this.#failed(e);
      },
    );
  }

  /** An agents event as the runtime's (the stream ends after a terminal one); one it does not relay reads on. */
  #relay(
    r: IteratorResult<AgentEvent>,
    events: AsyncIterator<AgentEvent>,
  ): IteratorResult<InvokeEventInit> | Promise<IteratorResult<InvokeEventInit>> {
    if (this.#done) return { done: true, value: undefined };
    if (r.done) {
      this.#done = true;
      if (this.#rejoin) return { done: false, value: { event: { case: "turnDone", value: {} } } };
      return {
        done: false,
        value: { event: { case: "error", value: { message: "agents stream ended without a terminal event" } } },
      };
    }
    const e = r.value;
    switch (e.type) {
      case "text":
        return { done: false, value: { event: { case: "textChunk", value: { content: e.content } } } };
      case "done":
        return this.#last({ event: { case: "turnDone", value: {} } });
      case "error":
        return this.#last({ event: { case: "error", value: { message: e.content || "agent run failed" } } });
      case "requires_action":
        return this.#last({ event: { case: "requiresAction", value: { calls: pendingCalls(e.content) } } });
      // The run ended at one of the session's budgets (agents, issue 20): the runtime has no such event.
      case "budget_reached":
        return this.#last({ event: { case: "error", value: { message: budgetMessage(e.content) } } });
      default:
        // tool_use, tool_result, user/assistant/tool: not runtime events.
        return this.#read(events);
    }
  }

  /** A terminal event: the agents stream is closed, as leaving a for-await closed it. */
  #last(value: InvokeEventInit): IteratorResult<InvokeEventInit> {
    this.#done = true;
    this.#events?.return?.()?.catch(() => {});
    return { done: false, value };
  }

  /** What a failed agents call ends the stream with. */
  #failed(err: unknown): unknown {
    this.#done = true;
    if (this.ctx.signal.aborted) return err;
    this.#log?.warn({ err: String(err) }, "agents call failed");
    // A request the agents service refused (malformed: hostile input must
    // never read as a server fault; no such session; a busy one) is the
    // caller's fault, not a failed call: its status is relayed as it is.
    if (isCallerFault(err)) return fromConnectError(err);
    // The agents' own message is relayed; a client-side failure's text
    // (an address, a JavaScript exception) stays in the log.
    const detail = isPlatformStatus(err) ? `: ${err.rawMessage}` : "";
    return new PlatformError(Code.Internal, "internal", `agents call failed${detail}`, {}, { cause: err });
  }
}

/** The tenant metadata of the call; UNAUTHENTICATED when a required entry is missing. */
function callIdentity(req: InvokeRequest, h: Headers): CallIdentity {
  const authorization = h.get(Metadata.authorization) ?? "";
  const tenantId = h.get(Metadata.tenantId) ?? "";
  const orgId = h.get(Metadata.orgId) ?? "";
  const userId = h.get(Metadata.userId) ?? "";
  const missing = [
    [Metadata.authorization, authorization],
    [Metadata.tenantId, tenantId],
    [Metadata.orgId, orgId],
    [Metadata.userId, userId],
  ]
    .filter(([, v]) => !v)
    .map(([k]) => k);
  if (missing.length > 0) throw PlatformError.unauthenticated(`missing tenant metadata: ${missing.join(", ")}`);
  return {
    authorization,
    tenantId,
    orgId,
    userId,
    // The message's echo fields first (the server stamps generated ids into
    // the metadata when a caller sent none), under the same rule as the
    // headers: an id that is not a short printable token is not used, since
    // it could not even be set on the agents call.
    requestId: acceptedId(req.requestId) ?? acceptedId(h.get(Metadata.requestId)) ?? randomUUID(),
    traceId: acceptedId(req.traceId) ?? acceptedId(h.get(Metadata.traceId)) ?? randomUUID().replaceAll("-", ""),
  };
}

type PendingToolCallInit = MessageInitShape<typeof PendingToolCallSchema>;

/** The calls of an agents `requires_action` event (`{"calls":[{toolUseId,name,input}]}`); input as JSON text. */
function pendingCalls(content: string): PendingToolCallInit[] {
  let calls: unknown;
  try {
    calls = (JSON.parse(content) as { calls?: unknown }).calls;
  } catch {
    return [];
  }
  if (!Array.isArray(calls)) return [];
  return calls.map((c: { toolUseId?: unknown; name?: unknown; input?: unknown; kind?: unknown }) => ({
    toolUseId: String(c.toolUseId ?? ""),
    name: String(c.name ?? ""),
    input: typeof c.input === "string" ? c.input : JSON.stringify(c.input ?? {}),
    // `client`: the caller runs the tool and answers with its result (not allow/deny).
    ...(typeof c.kind === "string" && { kind: c.kind }),
  }));
}

/** An agents `budget_reached` event ({budget, limit, used}) as the error a runtime caller reads. */
function budgetMessage(content: string): string {
  try {
    const { budget, limit, used } = JSON.parse(content) as { budget?: string; limit?: number; used?: number };
    return `the session reached its ${budget} budget (used ${used} of ${limit}); raise it to continue`;
  } catch {
    return "the session reached one of its budgets";
  }
}
