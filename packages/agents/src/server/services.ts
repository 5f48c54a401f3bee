import type { ServiceImpl } from "@connectrpc/connect";
import type { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { requestInfo } from "@platform/rpc";
import type { AgentsDomain } from "../domain/agents.ts";
import { authOf } from "./auth.ts";
import { agentToProto, eventToProto, sessionToProto } from "./convert.ts";

/** Last-Event-ID, the SSE reconnection header, when the query has no `after`. */
function resumeFrom(after: bigint, header: string | null): number {
  if (after > 0n) return Number(after);
  if (header && /^\d{1,15}$/.test(header.trim())) return Number(header.trim());
  return 0;
}

export function agentService(domain: AgentsDomain): ServiceImpl<typeof AgentService> {
  return {
    async createAgent(req, ctx) {
      const agent = await domain.createAgent(authOf(ctx), req);
      return { agent: agentToProto(agent) };
    },
    async listAgents(req, ctx) {
      const page = await domain.listAgents(authOf(ctx), req.limit, req.after);
      return { items: page.items.map(agentToProto), next: page.next };
    },
    async getAgent(req, ctx) {
      return { agent: agentToProto(await domain.getAgent(authOf(ctx), req.id)) };
    },
    async updateAgent(req, ctx) {
      const { id, name, slug, model, systemPrompt } = req;
      return { agent: agentToProto(await domain.updateAgent(authOf(ctx), id, { name, slug, model, systemPrompt })) };
    },
    async deleteAgent(req, ctx) {
      await domain.deleteAgent(authOf(ctx), req.id);
      return {};
    },
  };
}

export function sessionService(domain: AgentsDomain): ServiceImpl<typeof SessionService> {
  return {
    async createSession(req, ctx) {
      return { session: sessionToProto(await domain.createSession(authOf(ctx), req.agentId)) };
    },
    async listSessions(req, ctx) {
      const page = await domain.listSessions(authOf(ctx), req.limit, req.after, req.agentId);
      return { items: page.items.map(sessionToProto), next: page.next };
    },
    async deleteSession(req, ctx) {
      await domain.deleteSession(authOf(ctx), req.id);
      return {};
    },
    async getSession(req, ctx) {
      const { session, events } = await domain.getSession(authOf(ctx), req.id);
      return { session: sessionToProto(session), events: events.map(eventToProto) };
    },
    async *sendMessages(req, ctx) {
      const stream = await domain.sendMessages(authOf(ctx), req.id, req.messages, { signal: ctx.signal, logger: requestInfo(ctx)?.logger });
      for await (const event of stream) yield eventToProto(event);
    },
    async *streamEvents(req, ctx) {
      const after = resumeFrom(req.after, ctx.requestHeader.get("last-event-id"));
      const stream = await domain.streamEvents(authOf(ctx), req.id, after, ctx.signal);
      for await (const event of stream) yield eventToProto(event);
    },
    async cancelRun(req, ctx) {
      return { cancelled: await domain.cancelRun(authOf(ctx), req.id) };
    },
  };
}
