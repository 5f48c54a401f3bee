import type { Message } from "@platform/gen/agents/v1/agents_pb";
import type { CallIdentity } from "../metadata.ts";

/** One event of the agents service's stream (SessionEvent, trimmed). */
export interface AgentEvent {
  type: string;
  content: string;
}

/** What the tenant worker needs of the agents service. */
export interface AgentsPort {
  /**
   * SendMessages: appends the messages and streams the reply. `onOpen` runs
   * once the agents service accepted the call, before its first event.
   */
  sendMessages(
    sessionId: string,
    messages: Message[],
    call: CallIdentity,
    signal: AbortSignal,
    onOpen?: () => void,
  ): AsyncIterable<AgentEvent>;
  /**
   * Rejoins the session's current run (no messages were given): the run's
   * events so far, then live ones until its terminal event. When no run is
   * active it yields nothing. `onOpen` runs once the session is known.
   */
  rejoin(sessionId: string, call: CallIdentity, signal: AbortSignal, onOpen?: () => void): AsyncIterable<AgentEvent>;
}
