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
  return async function* invoke(req: InvokeRequest, ctx: HandlerContext): AsyncIterable<InvokeEventInit> {
    const call = callIdentity(req, ctx.requestHeader);
    if (call.tenantId.toLowerCase() !== tenantId || call.orgId.toLowerCase() !== orgId) {
      throw PlatformError.unauthenticated("tenant metadata does not match this worker");
    }
    if (!req.sessionId) throw PlatformError.invalidArgument("session_id is required");
    const log = deps.logger?.child({ requestId: call.requestId, traceId: call.traceId, sessionId: req.sessionId });
    const rejoin = req.messages.length === 0;
    // The agents service accepted the call: so does this worker (the router
    // sends its caller the SSE headers on this, not on the first text).
    const accepted = () => openStream(ctx);
    const events: AsyncIterable<AgentEvent> = rejoin
      ? deps.agents.rejoin(req.sessionId, call, ctx.signal, accepted)
      : deps.agents.sendMessages(req.sessionId, req.messages, call, ctx.signal, accepted);
    try {
      for await (const e of events) {
        switch (e.type) {
          case "text":
            yield { event: { case: "textChunk", value: { content: e.content } } };
            break;
          case "done":
            yield { event: { case: "turnDone", value: {} } };
            return;
          case "error":
            yield { event: { case: "error", value: { message: e.content || "agent run failed" } } };
            return;
          case "requires_action":
            yield { event: { case: "requiresAction", value: { calls: pendingCalls(e.content) } } };
            return;
          // The run ended at one of the session's budgets (agents, issue 20): the runtime has no such event.
          case "budget_reached":
            yield { event: { case: "error", value: { message: budgetMessage(e.content) } } };
            return;
          default:
            // tool_use, tool_result, user/assistant/tool: not runtime events.
            break;
        }
      }
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      log?.warn({ err: String(err) }, "agents call failed");
      // A request the agents service refused (malformed: hostile input must
      // never read as a server fault; no such session; a busy one) is the
      // caller's fault, not a failed call: its status is relayed as it is.
      if (isCallerFault(err)) throw fromConnectError(err);
      // The agents' own message is relayed; a client-side failure's text
      // (an address, a JavaScript exception) stays in the log.
      const detail = isPlatformStatus(err) ? `: ${err.rawMessage}` : "";
      throw new PlatformError(Code.Internal, "internal", `agents call failed${detail}`, {}, { cause: err });
    }
    if (rejoin) {
      yield { event: { case: "turnDone", value: {} } };
      return;
    }
    yield { event: { case: "error", value: { message: "agents stream ended without a terminal event" } } };
  };
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
