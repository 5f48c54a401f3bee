import type { ServiceImpl } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import type { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { openStream, requestInfo } from "@platform/rpc";
import type { AgentsDomain } from "../domain/agents.ts";
import type { SessionFiles } from "../domain/session-files.ts";
import type { UsageDomain } from "../domain/usage.ts";
import { authOf } from "./auth.ts";
import {
  agentToProto,
  budgetsToProto,
  eventToProto,
  pendingCallToProto,
  sessionFileToProto,
  sessionToProto,
  usageToProto,
} from "./convert.ts";
import { mapInTurns, relayInTurns } from "./loop-turns.ts";

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
      const { mcpServers } = req;
      const { id, name, slug, model, systemPrompt, toolPermissions, clientTools, budgets, networkPolicy, image } = req;
      return {
        agent: agentToProto(
          await domain.updateAgent(authOf(ctx), id, {
            mcpServers,
            name,
            slug,
            model,
            systemPrompt,
            toolPermissions,
            clientTools,
            budgets,
            networkPolicy,
            image,
          }),
        ),
      };
    },
    async deleteAgent(req, ctx) {
      await domain.deleteAgent(authOf(ctx), req.id);
      return {};
    },
  };
}

/** `files`: the workspace file RPCs; absent (tests of the other RPCs), they answer unimplemented. */
export function sessionService(
  domain: AgentsDomain,
  files?: SessionFiles,
  usage?: UsageDomain,
): ServiceImpl<typeof SessionService> {
  return {
    async createSession(req, ctx) {
      return { session: sessionToProto(await domain.createSession(authOf(ctx), req.agentId, req.budgets)) };
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
      const auth = authOf(ctx);
      const { session, events, next } = await domain.getSession(auth, req.id, {
        pageSize: req.pageSize,
        pageToken: req.pageToken,
      });
      const pending = await domain.pendingToolCalls(auth, session.id);
      // The usage record and budgets (absent from the log's read of the session).
      const metered = await usage?.sessionUsage(auth, session.id);
      return {
        session: sessionToProto(metered ? { ...session, budgets: metered.own } : session),
        usage: metered ? usageToProto(metered.usage) : undefined,
        effectiveBudgets: metered ? budgetsToProto(metered.effective) : undefined,
        events: await mapInTurns(events, eventToProto),
        pendingToolCalls: pending.map(pendingCallToProto),
        queuedSends: (await domain.queuedSends(auth, session.id)).map(BigInt),
        nextPageToken: next,
      };
    },
    sendMessages(req, ctx) {
      return relayInTurns(async () => {
        const stream = await domain.sendMessages(authOf(ctx), req.id, req.messages, {
          signal: ctx.signal,
          logger: requestInfo(ctx)?.logger,
          mode: req.mode,
        });
        // The run started: headers now (SSE 200, gRPC HEADERS), not with the
        // first event, which may come after a long model or tool call.
        openStream(ctx);
        return stream;
      }, eventToProto);
    },
    streamEvents(req, ctx) {
      return relayInTurns(async () => {
        const after = resumeFrom(req.after, ctx.requestHeader.get("last-event-id"));
        return domain.streamEvents(authOf(ctx), req.id, after, ctx.signal);
      }, eventToProto);
    },
    async submitToolDecisions(req, ctx) {
      const outcome = await domain.submitToolDecisions(authOf(ctx), req.id, req.decisions, {
        logger: requestInfo(ctx)?.logger,
      });
      return {
        pending: outcome.pending.map(pendingCallToProto),
        resumed: outcome.resumed,
        after: BigInt(outcome.after),
      };
    },
    async cancelRun(req, ctx) {
      return { cancelled: await domain.cancelRun(authOf(ctx), req.id) };
    },
    async listSessionFiles(req, ctx) {
      const { entries, truncated } = await need(files).list(
        authOf(ctx),
        req.id,
        { path: req.path, recursive: req.recursive, limit: req.limit },
        ctx.signal,
      );
      return { items: entries.map(sessionFileToProto), truncated };
    },
    async readSessionFile(req, ctx) {
      const res = await need(files).read(
        authOf(ctx),
        req.id,
        { path: req.path, offset: Number(req.offset), maxBytes: Number(req.maxBytes) },
        ctx.signal,
      );
      return { data: res.data, totalSize: BigInt(res.totalSize), eof: res.eof };
    },
    async writeSessionFile(req, ctx) {
      const written = await need(files).write(
        authOf(ctx),
        req.id,
        { path: req.path, data: req.data, append: req.append, mode: req.mode },
        ctx.signal,
      );
      return { bytesWritten: BigInt(written) };
    },
  };
}

function need(files: SessionFiles | undefined): SessionFiles {
  if (!files)
    throw new PlatformError(Code.Unimplemented, "unimplemented", "workspace files are not available in this service");
  return files;
}
