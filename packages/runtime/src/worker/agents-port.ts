import type { Message } from "@platform/gen/agents/v1/agents_pb";
import type { CallIdentity } from "../metadata.ts";

/** One event of the agents service's stream (SessionEvent, trimmed). */
export interface AgentEvent {
  type: string;
  content: string;
}

/** What the tenant worker needs of the agents service. */
export interface AgentsPort {
  /** SendMessages: appends the messages and streams the reply. */
  sendMessages(
    sessionId: string,
    messages: Message[],
    call: CallIdentity,
    signal: AbortSignal,
  ): AsyncIterable<AgentEvent>;
  /**
   * Rejoins the session's current run (no messages were given): the run's
   * events so far, then live ones until its terminal event. When no run is
   * active it yields nothing.
   */
  rejoin(sessionId: string, call: CallIdentity, signal: AbortSignal): AsyncIterable<AgentEvent>;
}
