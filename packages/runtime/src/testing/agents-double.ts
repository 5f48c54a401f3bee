import type { MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError, Code as ConnectCode, type ServiceImpl } from "@connectrpc/connect";
import {
  type GetSessionResponseSchema,
  type SendMessagesRequest,
  type SessionEventSchema,
  SessionService,
  type StreamEventsRequest,
} from "@platform/gen/agents/v1/agents_pb";
import { createServer, type Server, type ServiceTls } from "@platform/rpc";
import { pino } from "pino";

type EventInit = MessageInitShape<typeof SessionEventSchema>;

export interface AgentsCall {
  method: "sendMessages" | "getSession" | "streamEvents";
  request: SendMessagesRequest | StreamEventsRequest | { id: string };
  headers: Record<string, string>;
}

/**
 * An agents SessionService served over real gRPC (h2c), scripted per test:
 * `script` gives the events (or an error) SendMessages and StreamEvents
 * stream; `session` what GetSession answers. Every call is recorded. With
 * `tls` (an agents certificate) it serves https to runtime-worker
 * certificates only, as the agents service's internal port does.
 */
export class AgentsDouble {
  constructor(private readonly tls?: ServiceTls) {}

  readonly calls: AgentsCall[] = [];
  script: (call: AgentsCall) => EventInit[] | Error = () => [{ type: "text", content: "hello" }, { type: "done" }];
  session: MessageInitShape<typeof GetSessionResponseSchema> = { session: { id: "s", status: "idle" }, events: [] };
  /** Delay between streamed events, ms. */
  delayMs = 0;
  #server?: Server;
  /** Base URL once started. */
  url = "";

  async start(): Promise<string> {
    const stream = async function* (this: AgentsDouble, call: AgentsCall): AsyncIterable<EventInit> {
      const out = this.script(call);
      if (out instanceof Error) throw out;
      for (const e of out) {
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        if (e.type === "__throw") throw new ConnectError(e.content ?? "mid-stream failure", ConnectCode.Unavailable);
        yield e;
      }
    }.bind(this);
    const record = (method: AgentsCall["method"], request: AgentsCall["request"], h: Headers): AgentsCall => {
      const call = { method, request, headers: Object.fromEntries(h.entries()) };
      this.calls.push(call);
      return call;
    };
    const impl: Partial<ServiceImpl<typeof SessionService>> = {
      sendMessages: (req, ctx) => stream(record("sendMessages", req, ctx.requestHeader)),
      streamEvents: (req, ctx) => stream(record("streamEvents", req, ctx.requestHeader)),
      getSession: (req, ctx) => {
        record("getSession", { id: req.id }, ctx.requestHeader);
        return this.session;
      },
    };
    this.#server = createServer({
      name: "agents-double",
      envelope: "agents",
      logger: pino({ level: "silent" }),
      shutdownTimeoutMs: 1000,
      services: [{ service: SessionService, impl }],
      ...(this.tls && { internal: { tls: this.tls, callers: { [SessionService.typeName]: ["runtime-worker"] } } }),
    });
    this.url = (await this.#server.listen()).url;
    return this.url;
  }

  async close(): Promise<void> {
    await this.#server?.close();
  }
}
