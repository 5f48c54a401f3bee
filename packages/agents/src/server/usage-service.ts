import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { UsageService } from "@platform/gen/agents/v1/usage_pb";
import type { UsageDomain } from "../domain/usage.ts";
import { authOf } from "./auth.ts";
import { budgetsToProto, usageToProto } from "./convert.ts";

/** agents.v1.UsageService over the usage domain (REST routes in proto/agents/v1/usage.proto). */
export function usageService(usage: UsageDomain): ServiceImpl<typeof UsageService> {
  return {
    async getSessionUsage(req, ctx) {
      const found = await usage.sessionUsage(authOf(ctx), req.id);
      return {
        sessionId: found.sessionId,
        agentId: found.agentId,
        usage: usageToProto(found.usage),
        budgets: budgetsToProto(found.own),
        effectiveBudgets: budgetsToProto(found.effective),
      };
    },
    async getUsage(req, ctx) {
      const { usage: totals, since, until } = await usage.usage(authOf(ctx), req);
      return {
        usage: usageToProto(totals),
        since: timestampFromDate(since),
        until: timestampFromDate(until),
        sessions: BigInt(totals.sessions),
      };
    },
    async updateSessionBudgets(req, ctx) {
      const { own, effective } = await usage.setSessionBudgets(authOf(ctx), req.id, req.budgets);
      return { budgets: budgetsToProto(own), effectiveBudgets: budgetsToProto(effective) };
    },
  };
}
