import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  type ScheduleFiring as FiringMsg,
  ScheduleFiringSchema,
  type Schedule as ScheduleMsg,
  ScheduleSchema,
  type ScheduleService,
} from "@platform/gen/agents/v1/schedules_pb";
import type { ScheduleFiring } from "../domain/schedule-store.ts";
import type { Schedules, ScheduleView } from "../domain/schedules.ts";
import { authOf } from "./auth.ts";

export function scheduleService(schedules: Schedules): ServiceImpl<typeof ScheduleService> {
  return {
    async createSchedule(req, ctx) {
      // The request carries ScheduleInput's fields under the same names; the domain reads only those.
      const schedule = await schedules.create(authOf(ctx), req);
      return { schedule: scheduleToProto(schedule) };
    },
    async listSchedules(req, ctx) {
      const page = await schedules.list(authOf(ctx), req.agentId, req.limit, req.after, req.nextRuns);
      return { items: page.items.map(scheduleToProto), next: page.next };
    },
    async getSchedule(req, ctx) {
      return { schedule: scheduleToProto(await schedules.get(authOf(ctx), req.id, req.nextRuns)) };
    },
    async updateSchedule(req, ctx) {
      const { cron, timeZone, message, catchUp, enabled } = req;
      const schedule = await schedules.update(authOf(ctx), req.id, { cron, timeZone, message, catchUp, enabled });
      return { schedule: scheduleToProto(schedule) };
    },
    async deleteSchedule(req, ctx) {
      await schedules.delete(authOf(ctx), req.id);
      return {};
    },
    async listScheduleFirings(req, ctx) {
      const page = await schedules.listFirings(authOf(ctx), req.id, req.limit, req.after);
      return { items: page.items.map(firingToProto), next: page.next };
    },
  };
}

export function scheduleToProto(s: ScheduleView): ScheduleMsg {
  return create(ScheduleSchema, {
    id: s.id,
    agentId: s.agentId,
    cron: s.cron,
    timeZone: s.timeZone,
    message: s.message,
    target: s.target,
    sessionId: s.sessionId ?? "",
    catchUp: s.catchUp,
    enabled: s.enabled,
    nextRuns: s.nextRuns.map((d) => timestampFromDate(d)),
    createdBy: s.createdBy,
    createdAt: timestampFromDate(s.createdAt),
    updatedAt: timestampFromDate(s.updatedAt),
  });
}

export function firingToProto(f: ScheduleFiring): FiringMsg {
  return create(ScheduleFiringSchema, {
    id: f.id,
    scheduleId: f.scheduleId,
    slotTime: timestampFromDate(f.slotTime),
    firedAt: timestampFromDate(f.firedAt),
    status: f.status,
    reason: f.reason,
    sessionId: f.sessionId ?? "",
    runId: f.runId ?? "",
  });
}
