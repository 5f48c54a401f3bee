import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";

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
};

export const NO_KEY_SCOPE = "none";

/** The scope an API key needs for `service/method`. */
export function scopeOf(service: string, method: string): string {
  return scopes[`${service}/${method}`] ?? NO_KEY_SCOPE;
}
