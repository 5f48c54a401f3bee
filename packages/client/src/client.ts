import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import {
  AgentService,
  type Agent,
  type MessageSchema,
  type PendingToolCall,
  type Session,
  type SessionEvent as SessionEventMessage,
  SessionService,
} from "@platform/gen/agents/v1/agents_pb";
import {
  type APIKey,
  type CreateAPIKeyResponse,
  SessionService as AuthSessionService,
  OrgService,
  type User,
  UserService,
} from "@platform/gen/identity/v1/rest_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { CredentialState, type Tokens, tokensOf } from "./auth.ts";
import { toPlatformError } from "./errors.ts";
import type { ChatEvent } from "./events.ts";
import { follow, type ResumeOptions } from "./follow.ts";
import { createRestTransport, type HeadersInit } from "./rest/rest-transport.ts";

export interface PlatformClientOptions {
  /** identity's public REST origin (the launcher's `endpoints.identity`, port 8081 by default). */
  identity: string;
  /** The agents service's public REST origin (`endpoints.agents`, 8082). */
  agents: string;
  /** The runtime router's origin (`endpoints.router`, 8080), for `sessions.invoke`. */
  router?: string;
  /** Authenticate with this API key instead of a login. */
  apiKey?: string;
  /** A login kept from before (what `onTokens` was given): the client goes on with it, refreshing as needed. */
  tokens?: Tokens;
  /** Called with the new tokens after login and every refresh, and with undefined on logout or a refused refresh. */
  onTokens?: (tokens: Tokens | undefined) => void;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** Headers sent on every call (e.g. `x-request-id` is set per call by the services otherwise). */
  headers?: HeadersInit;
  /** How a broken reply stream is rejoined. */
  resume?: ResumeOptions;
  /** Deadline of each unary call, DEADLINE_EXCEEDED after it (30 s; 0: none). Streams have none. */
  timeoutMs?: number;
}

/** A message to send: plain text is one user message. */
export type MessageInput = string | MessageInitShape<typeof MessageSchema>[];

/** A page of a list. */
export interface Page<T> {
  items: T[];
  /** The cursor of the next page (`after`), undefined on the last. */
  next: string | undefined;
}

/** Options of a streamed call. */
export interface StreamOptions {
  signal?: AbortSignal;
}

/**
 * What a send does while a run holds the session (SendMessagesRequest.mode):
 * `enqueue` (the service's default) queues it after the runs before it,
 * `reject` fails with 409 `aborted`, `interrupt` stops the active run (it
 * ends with an `error` event) and is taken next.
 */
export type SendMode = "enqueue" | "reject" | "interrupt";

/** Options of send(). */
export interface SendOptions extends StreamOptions {
  /** While a run holds the session: queue (default), refuse, or interrupt it. */
  mode?: SendMode;
}

/** The router's invoke stream, typed. */
export type InvokeEvent =
  | { type: "text"; content: string }
  | { type: "turn_done" }
  | { type: "error"; message: string };

/** Runs `fn`, turning whatever it throws into the platform's PlatformError. */
async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toPlatformError(err);
  }
}

function messagesOf(input: MessageInput): MessageInitShape<typeof MessageSchema>[] {
  return typeof input === "string" ? [{ role: "user", content: input }] : input;
}

/**
 * The platform's client for Node 20+ and browsers: the generated Connect
 * clients over the public REST/SSE ports (`rpc`), with sign-in, token
 * refresh, API keys, PlatformError for every failure, and helpers for
 * agents, sessions and streamed replies.
 */
export class PlatformClient {
  /** The generated clients, for every RPC of the public surfaces (errors are ConnectErrors; see toPlatformError). */
  readonly rpc: {
    auth: Client<typeof AuthSessionService>;
    users: Client<typeof UserService>;
    orgs: Client<typeof OrgService>;
    agents: Client<typeof AgentService>;
    sessions: Client<typeof SessionService>;
    runtime: Client<typeof RuntimeService> | undefined;
  };
  readonly agents: AgentsApi;
  readonly sessions: SessionsApi;
  readonly apiKeys: ApiKeysApi;
  readonly #credentials: CredentialState;

  constructor(options: PlatformClientOptions) {
    const base = { fetch: options.fetch, headers: options.headers, unaryTimeoutMs: options.timeoutMs ?? 30_000 };
    // Login, refresh and logout go without a credential: they are the way to one.
    const anonymous = createRestTransport({ ...base, baseUrl: options.identity });
    const auth = createClient(AuthSessionService, anonymous);
    this.#credentials = new CredentialState(
      async (refreshToken) => (await auth.refresh({ refreshToken })).token!,
      options.onTokens,
    );
    this.#credentials.setApiKey(options.apiKey);
    if (options.tokens) this.#credentials.setTokens(options.tokens, false);
    const signed = (baseUrl: string): Transport => createRestTransport({ ...base, baseUrl, auth: this.#credentials });
    const identity = signed(options.identity);
    const agents = signed(options.agents);
    this.rpc = {
      auth,
      users: createClient(UserService, identity),
      orgs: createClient(OrgService, identity),
      agents: createClient(AgentService, agents),
      sessions: createClient(SessionService, agents),
      runtime: options.router ? createClient(RuntimeService, signed(options.router)) : undefined,
    };
    this.agents = new AgentsApi(this.rpc.agents);
    this.sessions = new SessionsApi(this.rpc.sessions, this.rpc.runtime, options.resume ?? {});
    this.apiKeys = new ApiKeysApi(this.rpc.users);
  }

  /** The current login's tokens (undefined when signed out or using an API key). */
  get tokens(): Tokens | undefined {
    return this.#credentials.tokens;
  }

  /** Signs in with email and password (identity's POST /v1/auth/login); later calls carry the access token. */
  async login(email: string, password: string, options: { deviceLabel?: string } = {}): Promise<Tokens> {
    const res = await call(() => this.rpc.auth.login({ email, password, xDeviceLabel: options.deviceLabel ?? "" }));
    const tokens = tokensOf(res.token!);
    this.#credentials.setApiKey(undefined);
    this.#credentials.setTokens(tokens);
    return tokens;
  }

  /** Uses an API key from now on (instead of a login). */
  useApiKey(key: string): void {
    this.#credentials.setTokens(undefined);
    this.#credentials.setApiKey(key);
  }

  /** Exchanges the refresh token for a new pair now (calls do it by themselves when needed). */
  async refresh(): Promise<Tokens> {
    if (!this.#credentials.tokens) throw PlatformError.unauthenticated("not logged in", "not_logged_in");
    await call(() => this.#credentials.refresh());
    return this.#credentials.tokens!;
  }

  /** Signs out: the refresh token's family is revoked (POST /v1/auth/logout) and the tokens dropped. */
  async logout(): Promise<void> {
    const tokens = this.#credentials.tokens;
    this.#credentials.setTokens(undefined);
    if (tokens) await call(() => this.rpc.auth.logout({ refreshToken: tokens.refreshToken }));
  }

  /** The signed-in user (GET /v1/users/me). */
  async me(): Promise<User> {
    return call(async () => (await this.rpc.users.getMe({})).user!);
  }
}

/** Agents of the signed-in organization: create, list, get, update, delete. */
export class AgentsApi {
  constructor(private readonly rpc: Client<typeof AgentService>) {}

  /** Creates an agent (`model`: `dev/echo`, `anthropic/...`, `openai/...`); slugs are unique in the org. */
  create(agent: { name: string; slug: string; model: string; systemPrompt?: string }): Promise<Agent> {
    return call(async () => (await this.rpc.createAgent(agent)).agent!);
  }
  /** One agent by id (404 `not_found` for another org's). */
  get(id: string): Promise<Agent> {
    return call(async () => (await this.rpc.getAgent({ id })).agent!);
  }
  /** One page of the org's agents, newest first. */
  list(options: { limit?: number; after?: string } = {}): Promise<Page<Agent>> {
    return call(async () => {
      const res = await this.rpc.listAgents({ limit: options.limit, after: options.after ?? "" });
      return { items: res.items, next: res.next };
    });
  }
  /** Every agent of the org, page after page. */
  async *all(pageSize = 100): AsyncGenerator<Agent> {
    let after: string | undefined;
    do {
      const page = await this.list({ limit: pageSize, after });
      yield* page.items;
      after = page.next;
    } while (after);
  }
  /** Changes the fields given. */
  update(id: string, fields: { name?: string; slug?: string; model?: string; systemPrompt?: string }): Promise<Agent> {
    return call(async () => (await this.rpc.updateAgent({ id, ...fields })).agent!);
  }
  delete(id: string): Promise<void> {
    return call(async () => {
      await this.rpc.deleteAgent({ id });
    });
  }
}

/** Sessions and their runs: create, get, list, delete, cancel; send messages and rejoin streams as typed events; invoke through the router. */
export class SessionsApi {
  constructor(
    private readonly rpc: Client<typeof SessionService>,
    private readonly runtime: Client<typeof RuntimeService> | undefined,
    private readonly resume: ResumeOptions,
  ) {}

  /** A new session of the agent. */
  create(agentId: string): Promise<Session> {
    return call(async () => (await this.rpc.createSession({ agentId })).session!);
  }
  /**
   * The session with its whole event log: GetSession answers a page at a
   * time (1,000 events at most), so the pages are read until none is left.
   * The session and its pending tool calls are those of the first page.
   */
  get(id: string): Promise<{ session: Session; events: SessionEventMessage[]; pendingToolCalls: PendingToolCall[] }> {
    return call(async () => {
      const first = await this.rpc.getSession({ id });
      const events = [...first.events];
      for (let token = first.nextPageToken; token; ) {
        const page = await this.rpc.getSession({ id, pageToken: token });
        events.push(...page.events);
        token = page.nextPageToken;
      }
      return { session: first.session!, events, pendingToolCalls: first.pendingToolCalls };
    });
  }
  /** One page of the org's sessions (of one agent with `agentId`), newest first. */
  list(options: { agentId?: string; limit?: number; after?: string } = {}): Promise<Page<Session>> {
    return call(async () => {
      const res = await this.rpc.listSessions({
        agentId: options.agentId ?? "",
        limit: options.limit,
        after: options.after ?? "",
      });
      return { items: res.items, next: res.next };
    });
  }
  delete(id: string): Promise<void> {
    return call(async () => {
      await this.rpc.deleteSession({ id });
    });
  }
  /** Stops the session's active run (its stream ends with an `error` event); false when none was active. */
  cancel(id: string): Promise<boolean> {
    return call(async () => (await this.rpc.cancelRun({ id })).cancelled);
  }

  /**
   * Sends a message (text, or messages) and yields the reply's events as they
   * come, until `done` or `error`, rejoining the stream from the last event id
   * if the connection drops: each event exactly once. While a run holds the
   * session, `mode` decides (see SendMode); a queued or interrupting send
   * yields its `message_queued` event (type `other`) first, then the events
   * of the run that takes it.
   */
  send(id: string, message: MessageInput, options: SendOptions = {}): AsyncGenerator<ChatEvent> {
    const messages = messagesOf(message);
    const mode = options.mode ?? "";
    return follow(
      {
        open: (signal, onHeader) => this.rpc.sendMessages({ id, messages, mode }, { signal, onHeader }),
        rejoin: (after, signal) => this.#rejoin(id, after, signal),
        // Broken before its first event: the run's events follow the messages just logged.
        start: async () => {
          const { events } = await this.get(id);
          const sent = events.filter((e) => e.type === "user" || e.type === "assistant" || e.type === "tool").at(-1);
          return sent ? Number(sent.seq) : 0;
        },
      },
      this.resume,
      options.signal,
    );
  }

  /** The session's events after `after` (default: all of them), then live ones until the run's end, rejoined like send(). */
  events(id: string, options: StreamOptions & { after?: number } = {}): AsyncGenerator<ChatEvent> {
    const after = options.after ?? 0;
    return follow(
      {
        open: (signal, onHeader) => this.#rejoin(id, after, signal, onHeader),
        rejoin: (last, signal) => this.#rejoin(id, last, signal),
        after,
      },
      this.resume,
      options.signal,
    );
  }

  #rejoin(id: string, after: number, signal: AbortSignal, onHeader?: () => void): AsyncIterable<SessionEventMessage> {
    return this.rpc.streamEvents({ id }, { signal, onHeader, headers: { "last-event-id": String(after) } });
  }

  /**
   * The runtime router's invoke (POST /v1/sessions/{id}/invoke): the reply
   * as text chunks, then `turn_done` (or `error`). The router's stream has no
   * event ids, so it is not resumed: use send() for that.
   */
  async *invoke(id: string, message?: MessageInput, options: StreamOptions = {}): AsyncGenerator<InvokeEvent> {
    if (!this.runtime) throw PlatformError.invalidArgument("no router endpoint was given to the client");
    try {
      const messages = message === undefined ? [] : messagesOf(message);
      for await (const e of this.runtime.invoke({ sessionId: id, messages }, { signal: options.signal })) {
        switch (e.event.case) {
          case "textChunk":
            yield { type: "text", content: e.event.value.content };
            break;
          case "turnDone":
            yield { type: "turn_done" };
            return;
          case "error":
            yield { type: "error", message: e.event.value.message };
            return;
        }
      }
    } catch (err) {
      throw toPlatformError(err);
    }
  }
}

/** The signed-in user's API keys: create (raw key once), list, revoke. */
export class ApiKeysApi {
  constructor(private readonly rpc: Client<typeof UserService>) {}

  /** A new API key of the signed-in user (a JWT call: an API key cannot make keys); `rawKey` is shown once. */
  create(options: {
    name: string;
    scopes?: string[];
    env?: "live" | "test";
    org?: boolean;
  }): Promise<CreateAPIKeyResponse> {
    return call(() => this.rpc.createAPIKey({ ...options, env: options.env ?? "" }));
  }
  /** The caller's keys (never their secret part). */
  list(): Promise<APIKey[]> {
    return call(async () => (await this.rpc.listAPIKeys({})).apiKeys);
  }
  /** The key stops authenticating at once. */
  revoke(id: string): Promise<void> {
    return call(async () => {
      await this.rpc.revokeAPIKey({ id });
    });
  }
}
