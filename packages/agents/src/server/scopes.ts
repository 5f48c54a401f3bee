import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { ScheduleService } from "@platform/gen/agents/v1/schedules_pb";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";

/**
 * The API key scope (identity's api-keys/scopes.ts) each agents RPC needs:
 * what a REST GET does is `read`; changing agents is `agents:write`; starting,
 * driving, cancelling and deleting sessions is `sessions:run`. REST and gRPC
 * reach the same RPC, so one table guards both. An RPC missing here needs a
 * scope no key has: a new RPC is never open to keys by accident.
 */
const scopes: Record<string, string> = {
  [`${AgentService.typeName}/CreateAgent`]: "agents:write",
  [`${AgentService.typeName}/ListAgents`]: "read",
  [`${AgentService.typeName}/GetAgent`]: "read",
  [`${AgentService.typeName}/UpdateAgent`]: "agents:write",
  [`${AgentService.typeName}/DeleteAgent`]: "agents:write",
  [`${SessionService.typeName}/CreateSession`]: "sessions:run",
  [`${SessionService.typeName}/ListSessions`]: "read",
  [`${SessionService.typeName}/DeleteSession`]: "sessions:run",
  [`${SessionService.typeName}/GetSession`]: "read",
  [`${SessionService.typeName}/SendMessages`]: "sessions:run",
  [`${SessionService.typeName}/StreamEvents`]: "read",
  [`${SessionService.typeName}/CancelRun`]: "sessions:run",
  // Answering a paused run's tool calls drives the session.
  [`${SessionService.typeName}/SubmitToolDecisions`]: "sessions:run",
  // A session's files: reading them is `read`, as a REST GET; writing them
  // changes what the session's commands see, as driving the session does.
  [`${SessionService.typeName}/ListSessionFiles`]: "read",
  [`${SessionService.typeName}/ReadSessionFile`]: "read",
  [`${SessionService.typeName}/WriteSessionFile`]: "sessions:run",
  // Usage is read like the rows it sums; a session's budgets limit what
  // running it may cost, so setting them is for who may change agents.
  [`${UsageService.typeName}/GetSessionUsage`]: "read",
  [`${UsageService.typeName}/GetUsage`]: "read",
  [`${UsageService.typeName}/UpdateSessionBudgets`]: "agents:write",
  // A schedule's firings start runs in the org's name: creating, changing
  // and deleting one is driving sessions; reading them is `read`.
  [`${ScheduleService.typeName}/CreateSchedule`]: "sessions:run",
  [`${ScheduleService.typeName}/ListSchedules`]: "read",
  [`${ScheduleService.typeName}/GetSchedule`]: "read",
  [`${ScheduleService.typeName}/UpdateSchedule`]: "sessions:run",
  [`${ScheduleService.typeName}/DeleteSchedule`]: "sessions:run",
  [`${ScheduleService.typeName}/ListScheduleFirings`]: "read",
};

export const NO_KEY_SCOPE = "none";

/** The scope an API key needs for `service/method`. */
export function scopeOf(service: string, method: string): string {
  return scopes[`${service}/${method}`] ?? NO_KEY_SCOPE;
}
