import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { type Message, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { streamCall } from "@platform/rpc";
import { type CallIdentity, identityHeaders } from "../metadata.ts";
import type { AgentEvent, AgentsPort } from "./agents-port.ts";

const TERMINAL = new Set(["done", "error", "requires_action", "budget_reached"]);

/** AgentsPort over the agents service's gRPC SessionService. */
export class ConnectAgentsClient implements AgentsPort {
  readonly #client: Client<typeof SessionService>;

  constructor(private readonly transport: Transport) {
    this.#client = createClient(SessionService, transport);
  }

  /** The call's messages as they come: an agents Event is an AgentEvent (its type and content), passed on as it is. */
  sendMessages(
    sessionId: string,
    messages: Message[],
    call: CallIdentity,
    signal: AbortSignal,
    onOpen?: () => void,
  ): AsyncIterable<AgentEvent> {
    // The response headers: the agents service accepted the call (it sends
    // them before its first event).
    return streamCall(
      this.transport,
      SessionService.method.sendMessages,
      { id: sessionId, messages },
      { headers: identityHeaders(call), signal, onHeader: onOpen && (() => onOpen()) },
    );
  }

  async *rejoin(
    sessionId: string,
    call: CallIdentity,
    signal: AbortSignal,
    onOpen?: () => void,
  ): AsyncIterable<AgentEvent> {
    const headers = identityHeaders(call);
    const first = await this.#client.getSession({ id: sessionId }, { headers, signal });
    const { session, events, pendingToolCalls } = first;
    onOpen?.();
    if (session?.status !== "running") {
      // Idle, its run paused on tool calls that still wait for answers: that is what the caller rejoins.
      if (pendingToolCalls.length > 0) {
        const calls = pendingToolCalls.map((c) => ({
          toolUseId: c.toolUseId,
          name: c.name,
          input: c.input,
          kind: c.kind,
        }));
        yield { type: "requires_action", content: JSON.stringify({ calls }) };
      }
      return;
    }
    // The current run starts after the last terminal event of the log, which
    // may lie past GetSession's first page (1,000 events): the log's pages.
    let after = 0n;
    for (const e of events) if (TERMINAL.has(e.type) && e.seq > after) after = e.seq;
    for (let pageToken = first.nextPageToken; pageToken; ) {
      const page = await this.#client.getSession({ id: sessionId, pageToken }, { headers, signal });
      for (const e of page.events) if (TERMINAL.has(e.type) && e.seq > after) after = e.seq;
      pageToken = page.nextPageToken;
    }
    yield* streamCall(
      this.transport,
      SessionService.method.streamEvents,
      { id: sessionId, after },
      { headers, signal },
    );
  }
}
