import { randomUUID } from "node:crypto";
import { readSse } from "../cli/sse.ts";

/** An answer of a REST endpoint: status, the Retry-After header, the JSON body (if any). */
export type Answer<T = Record<string, unknown>> = { status: number; retryAfter: string | null; body: T; ms: number };

/** A session event as a client received it (SSE id + data) or as the log stores it. */
export type SeenEvent = { seq: number; type: string; content?: string; toolUseId?: string; isError?: boolean };

export async function call<T = Record<string, unknown>>(
  method: string,
  url: string,
  options: { token?: string; body?: unknown; idempotent?: boolean; timeoutMs?: number } = {},
): Promise<Answer<T>> {
  const started = Date.now();
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  if (options.idempotent) headers["idempotency-key"] = randomUUID();
  const res = await fetch(url, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: body as T, ms: Date.now() - started };
}

/** The same call, never throwing: a transport failure is status 0. */
export async function tryCall<T = Record<string, unknown>>(
  method: string,
  url: string,
  options: Parameters<typeof call>[2] = {},
): Promise<Answer<T>> {
  const started = Date.now();
  try {
    return await call<T>(method, url, options);
  } catch (err) {
    return { status: 0, retryAfter: null, body: { transport: (err as Error).message } as T, ms: Date.now() - started };
  }
}

/** A client of one user: its access token, the agents and sessions it makes, its streams. */
export class User {
  constructor(
    readonly endpoints: { identity: string; agents: string },
    readonly token: string,
    readonly refreshToken: string,
  ) {}

  static async login(endpoints: { identity: string; agents: string }, email: string, password: string): Promise<User> {
    const a = await call<{ access_token: string; refresh_token: string }>(
      "POST",
      `${endpoints.identity}/v1/auth/login`,
      { body: { email, password } },
    );
    if (a.status !== 200) throw new Error(`login: ${a.status} ${JSON.stringify(a.body)}`);
    return new User(endpoints, a.body.access_token, a.body.refresh_token);
  }

  async agent(model = "dev/echo"): Promise<string> {
    const slug = `f-${randomUUID().slice(0, 8)}`;
    const a = await call<{ id: string }>("POST", `${this.endpoints.agents}/v1/agents`, {
      token: this.token,
      body: { name: slug, slug, model },
    });
    if (a.status !== 201 && a.status !== 200) throw new Error(`create agent: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body.id;
  }

  async session(agentId: string): Promise<string> {
    const a = await call<{ id: string }>("POST", `${this.endpoints.agents}/v1/sessions`, {
      token: this.token,
      body: { agentId },
    });
    if (a.status !== 201 && a.status !== 200) throw new Error(`create session: ${a.status} ${JSON.stringify(a.body)}`);
    return a.body.id;
  }

  /** The session and its stored log. */
  async stored(
    sessionId: string,
  ): Promise<{ session: { status: string; lastSeq?: string | number; sandboxId?: string }; events: SeenEvent[] }> {
    const a = await call<{
      session: { status: string; sandboxId?: string };
      events: Array<SeenEvent & { seq: string | number }>;
    }>("GET", `${this.endpoints.agents}/v1/sessions/${sessionId}`, {
      token: this.token,
    });
    if (a.status !== 200) throw new Error(`get session: ${a.status} ${JSON.stringify(a.body)}`);
    return { session: a.body.session, events: (a.body.events ?? []).map((e) => ({ ...e, seq: Number(e.seq) })) };
  }

  /** POST messages: the run's SSE stream (see Stream). */
  send(sessionId: string, text: string, options: StreamOptions = {}): Promise<Stream> {
    return stream(
      `${this.endpoints.agents}/v1/sessions/${sessionId}/messages`,
      "POST",
      this.token,
      { messages: [{ role: "user", content: text }] },
      options,
    );
  }

  /** GET the session's events after `after` (a rejoin), then live ones. */
  follow(sessionId: string, after: number, options: StreamOptions = {}): Promise<Stream> {
    return stream(
      `${this.endpoints.agents}/v1/sessions/${sessionId}/events?after=${after}`,
      "GET",
      this.token,
      undefined,
      options,
    );
  }

  cancel(sessionId: string): Promise<Answer> {
    return tryCall("POST", `${this.endpoints.agents}/v1/sessions/${sessionId}/cancel`, { token: this.token, body: {} });
  }
}

export type StreamOptions = {
  /** Go away (abort the request) when this returns true for a received event, or at this time after the start. */
  leaveWhen?: (event: SeenEvent, all: SeenEvent[]) => boolean;
  leaveAfterMs?: number;
  /** Called for each event as it arrives. */
  onEvent?: (event: SeenEvent) => void;
  timeoutMs?: number;
};

/** What one client saw of a stream: the HTTP answer, every event (SSE id → data) and how it ended. */
export type Stream = {
  status: number;
  body?: unknown;
  events: SeenEvent[];
  /** terminal: a done/error event; closed: the server closed the stream without one; left: the client went away; broken: the connection failed. */
  end: "terminal" | "closed" | "left" | "broken";
  error?: string;
};

export async function stream(
  url: string,
  method: string,
  token: string,
  body: unknown,
  options: StreamOptions = {},
): Promise<Stream> {
  const controller = new AbortController();
  const timeout = setTimeout(() => controller.abort(new Error("stream timeout")), options.timeoutMs ?? 120_000);
  let leaveTimer: NodeJS.Timeout | undefined;
  let left = false;
  const leave = () => {
    left = true;
    controller.abort(new Error("client left"));
  };
  if (options.leaveAfterMs !== undefined) leaveTimer = setTimeout(leave, options.leaveAfterMs);
  const events: SeenEvent[] = [];
  // Set before the request is aborted: leaving the body's iterator after an abort may throw.
  let terminal = false;
  try {
    const res = await fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: "text/event-stream",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: controller.signal,
    });
    if (res.status !== 200) {
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {}
      return { status: res.status, body: parsed, events, end: "closed" };
    }
    for await (const message of readSse(res)) {
      const data = JSON.parse(message.data) as Omit<SeenEvent, "seq">;
      const event: SeenEvent = { ...data, seq: Number(message.id) };
      events.push(event);
      options.onEvent?.(event);
      if (event.type === "done" || event.type === "error") {
        terminal = true;
        controller.abort();
        return { status: 200, events, end: "terminal" };
      }
      if (options.leaveWhen?.(event, events)) {
        leave();
        return { status: 200, events, end: "left" };
      }
    }
    return { status: 200, events, end: "closed" };
  } catch (err) {
    if (terminal) return { status: 200, events, end: "terminal" };
    return {
      status: events.length > 0 ? 200 : 0,
      events,
      end: left ? "left" : "broken",
      error: (err as Error).message,
    };
  } finally {
    clearTimeout(timeout);
    clearTimeout(leaveTimer);
  }
}

/**
 * Events a client received that the stored log contradicts: an id the log
 * holds as another event (type, content, tool call, error flag), or an id the
 * log does not hold at all. Empty when every received event names the same
 * event in the log.
 */
export function contradictions(received: SeenEvent[], stored: SeenEvent[]): string[] {
  const bySeq = new Map(stored.map((e) => [e.seq, e]));
  const out: string[] = [];
  for (const r of received) {
    const s = bySeq.get(r.seq);
    if (!s) {
      out.push(`seq ${r.seq} (${r.type}) was received but is not in the log`);
      continue;
    }
    const same =
      s.type === r.type &&
      (s.content ?? "") === (r.content ?? "") &&
      (s.toolUseId ?? "") === (r.toolUseId ?? "") &&
      Boolean(s.isError) === Boolean(r.isError);
    if (!same) out.push(`seq ${r.seq} was received as ${JSON.stringify(r)} and is stored as ${JSON.stringify(s)}`);
  }
  return out;
}

/** Runs of a stored log that never ended: a user message followed by run events without a terminal done/error after them. */
export function unterminatedRun(stored: SeenEvent[]): boolean {
  let open = false;
  for (const e of stored) {
    if (e.type === "user" || e.type === "assistant" || e.type === "tool") open = true;
    if (e.type === "done" || e.type === "error") open = false;
  }
  return open;
}

/**
 * Sends `text` until a run of it ends with `done`, its tool call (for a
 * `run:` command) succeeded included (a busy session's 409, a
 * 503 or a broken connection is retried every second): the last stream, the
 * attempts and the time it took. Throws with what was seen after `timeoutMs`.
 */
export async function runToDone(
  user: User,
  sessionId: string,
  text: string,
  timeoutMs: number,
  streams?: SeenEvent[][],
): Promise<{ stream: Stream; attempts: number; ms: number }> {
  const started = Date.now();
  const seen: string[] = [];
  for (let attempts = 1; ; attempts++) {
    const s = await user.send(sessionId, text, { timeoutMs: Math.max(5_000, timeoutMs - (Date.now() - started)) });
    streams?.push(s.events);
    const last = s.events.at(-1);
    // A tool command is done when its tool ran: a run that reports a failed tool is not a recovery.
    const toolRan = !text.startsWith("run:") || s.events.some((e) => e.type === "tool_result" && !e.isError);
    if (s.end === "terminal" && last?.type === "done" && toolRan)
      return { stream: s, attempts, ms: Date.now() - started };
    seen.push(
      `${s.status} ${s.end} ${last ? `${last.type} ${last.content ?? ""}` : JSON.stringify(s.body ?? s.error)}`.slice(
        0,
        300,
      ),
    );
    if (Date.now() - started > timeoutMs)
      throw new Error(`no completed run on ${sessionId} within ${timeoutMs / 1000} s: ${seen.slice(-5).join(" | ")}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * A user's identity traffic while something fails: refresh-token rotations
 * (a lost answer is retried with the same token, as a client does, which may
 * revoke the family: then a new login) and API key creations, each retried
 * with its Idempotency-Key until it gets an answer. Runs until `stop()`
 * returns true; counts what happened in `counts` as it goes.
 */
export async function identityChurn(
  endpoints: { identity: string },
  email: string,
  password: string,
  stop: () => boolean,
  counts: Record<string, number> = {},
): Promise<Record<string, number>> {
  const count = (what: string) => (counts[what] = (counts[what] ?? 0) + 1);
  let pair: { access_token: string; refresh_token: string } | undefined;
  let key: string | undefined;
  while (!stop()) {
    if (!pair) {
      const login = await tryCall<{ access_token: string; refresh_token: string }>(
        "POST",
        `${endpoints.identity}/v1/auth/login`,
        { body: { email, password }, timeoutMs: 10_000 },
      );
      count(`login ${login.status}`);
      if (login.status === 200) pair = login.body;
      else await new Promise((r) => setTimeout(r, 300));
      continue;
    }
    const refresh = await tryCall<{ access_token: string; refresh_token: string }>(
      "POST",
      `${endpoints.identity}/v1/auth/refresh`,
      {
        body: { refresh_token: pair.refresh_token },
        timeoutMs: 10_000,
      },
    );
    count(`refresh ${refresh.status}`);
    if (refresh.status === 200) pair = refresh.body;
    else if (refresh.status === 401) pair = undefined;
    key ??= randomUUID();
    const created = await fetch(`${endpoints.identity}/v1/users/me/api_keys`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${pair?.access_token ?? ""}`,
        "content-type": "application/json",
        "idempotency-key": key,
      },
      body: JSON.stringify({ name: `churn-${key.slice(0, 8)}` }),
      signal: AbortSignal.timeout(10_000),
    }).then(
      async (r) => {
        await r.arrayBuffer();
        return r.status;
      },
      () => 0,
    );
    count(`api key ${created}`);
    // A transport failure or a 409 (the first attempt still held) is retried with the same key; any other answer ends it.
    if (created !== 0 && created !== 409) key = undefined;
    await new Promise((r) => setTimeout(r, 100));
  }
  return counts;
}
