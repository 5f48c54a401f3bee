import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { type Context, createSession, type Flags, type Session, type SessionEvent } from "./commands.ts";
import { UsageError } from "./endpoints.ts";
import { ApiError, type PlatformClient } from "./http.ts";
import type { Output } from "./output.ts";
import { readSse, unescapeChunk } from "./sse.ts";

/**
 * The turn whose run Ctrl-C cancels. `paused`: its run stopped for tool
 * decisions (`requires_action`), so the router's reply ended early and the
 * events stream carries the rest of the reply's text.
 */
type Turn = { sessionId: string; before: number; abort: AbortController; paused?: boolean };

/**
 * Lines of stdin, read on demand: a conversation's messages and the y/n
 * answers to tool calls come from the same reader, in the order asked.
 */
export class StdinLines {
  #lines: AsyncIterator<string> | undefined;
  #sigint: (() => void) | undefined;

  onSigint(handler: () => void): void {
    this.#sigint = handler;
  }

  async next(): Promise<string | undefined> {
    if (!this.#lines) {
      const rl = createInterface({ input: process.stdin });
      rl.on("SIGINT", () => this.#sigint?.());
      this.#lines = rl[Symbol.asyncIterator]();
    }
    const r = await this.#lines.next();
    return r.done ? undefined : r.value;
  }
}

/** Exit status after Ctrl-C (128 + SIGINT), as shells report it. */
export const INTERRUPTED = 130;

/**
 * `platform chat`: one turn, or one per line of stdin. The reply's text
 * streams through the runtime router (the public path); the session's own
 * event stream on the agents service shows tool calls, their live output
 * and their results. Ctrl-C cancels the run in progress (the agents
 * service's cancel route: a client going away does not stop a run) and
 * exits with 130.
 */
export async function chat(ctx: Context, args: string[], flags: Flags): Promise<void> {
  const client = ctx.client();
  const { io } = ctx;
  let sessionId: string;
  let words = args;
  if (typeof flags.agent === "string") {
    const { session, agent } = await createSession(client, flags.agent);
    sessionId = session.id;
    if (io.json) io.value({ type: "session_created", session });
    else io.err(`created session ${session.id} (agent ${agent.slug})`);
  } else {
    if (!args[0]) throw new UsageError("chat needs a session id or --agent <id|slug>");
    sessionId = args[0];
    words = args.slice(1);
  }
  const interrupt = new Interrupt(client, io);
  const stdin = new StdinLines();
  stdin.onSigint(() => interrupt.fire());
  try {
    if (words.length > 0) return await chatTurn(client, sessionId, words.join(" "), io, interrupt, stdin);
    if (process.stdin.isTTY)
      io.err("type a message and press enter; Ctrl-D ends the conversation, Ctrl-C cancels a reply");
    for (let line = await stdin.next(); line !== undefined; line = await stdin.next()) {
      if (line.trim()) await chatTurn(client, sessionId, line, io, interrupt, stdin);
    }
  } finally {
    interrupt.dispose();
  }
}

/** Ctrl-C: cancel the current turn's run (if any), then exit 130. A second Ctrl-C exits at once. */
export class Interrupt {
  current: Turn | undefined;
  #firing = false;
  readonly #onSignal = () => this.fire();

  constructor(
    private readonly client: PlatformClient,
    private readonly io: Output,
  ) {
    process.on("SIGINT", this.#onSignal);
  }

  fire(): void {
    if (this.#firing) process.exit(INTERRUPTED);
    this.#firing = true;
    const turn = this.current;
    if (!turn) process.exit(INTERRUPTED);
    turn.abort.abort();
    if (!this.io.json) this.io.err("\ncancelling the run…");
    void cancelRun(this.client, turn).then(
      (outcome) => {
        if (this.io.json) this.io.value({ type: "interrupted", run: outcome });
        else
          this.io.err(
            outcome === "cancelled"
              ? "cancelled"
              : outcome === "ended"
                ? "the run had already ended"
                : "no run to cancel",
          );
        process.exit(INTERRUPTED);
      },
      (err: unknown) => {
        this.io.err(`could not cancel the run: ${(err as Error).message}`);
        process.exit(INTERRUPTED);
      },
    );
  }

  dispose(): void {
    process.off("SIGINT", this.#onSignal);
  }
}

/**
 * Cancels the turn's run. The run may not have started yet when Ctrl-C
 * comes (the router is still waking the worker), so the cancel is repeated
 * for a few seconds until it hits a run or the session shows the run ended.
 */
async function cancelRun(client: PlatformClient, turn: Turn): Promise<"cancelled" | "ended" | "none"> {
  const deadline = Date.now() + 5000;
  const base = `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(turn.sessionId)}`;
  while (Date.now() < deadline) {
    const res = await client.request<{ cancelled?: boolean }>("POST", `${base}/cancel`);
    if (res.cancelled) return "cancelled";
    const now = await client.request<{ session: Session }>("GET", base);
    if (Number(now.session.lastSeq ?? 0) > turn.before && now.session.status !== "running") return "ended";
    await sleep(100);
  }
  return "none";
}

/**
 * One turn. Two streams run side by side: the router's reply (text) and the
 * session's events. The events stream used to be cut off as soon as the
 * router said turn_done, and reopened with a 100 ms pause whenever it had
 * opened before the run existed (a stream of a session without a run
 * replays and closes at once): when the tool round fell into one of those
 * pauses, or the reply ended first, its events were never printed. Now the
 * events stream is the one that decides the turn is over: it is followed
 * until the run's own terminal event, resuming after the last seq it
 * printed, so every tool call and result is shown exactly once.
 */
export async function chatTurn(
  client: PlatformClient,
  sessionId: string,
  message: string,
  io: Output,
  interrupt: Interrupt,
  stdin: StdinLines = new StdinLines(),
): Promise<void> {
  const session = await client.request<{ session: Session }>(
    "GET",
    `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(sessionId)}`,
  );
  const turn: Turn = { sessionId, before: Number(session.session.lastSeq ?? 0), abort: new AbortController() };
  interrupt.current = turn;
  const events = followTurn(client, turn, io, stdin);
  // A rejection before it is awaited must not end the process.
  events.catch(() => {});
  let failure: unknown;
  try {
    const res = await client.send(
      "POST",
      `${client.endpoints.router}/v1/sessions/${encodeURIComponent(sessionId)}/invoke`,
      {
        body: { messages: [{ role: "user", content: message }] },
        headers: { accept: "text/event-stream" },
        signal: turn.abort.signal,
      },
    );
    for await (const ev of readSse(res)) {
      if (ev.event === "turn_done") break;
      if (ev.event === "error") {
        failure = new ApiError(200, "stream_error", (JSON.parse(ev.data) as { message: string }).message);
        break;
      }
      if (!io.json) io.write(unescapeChunk(ev.data));
    }
    if (!io.json) io.write("\n");
  } catch (err) {
    if (turn.abort.signal.aborted) return new Promise(() => {}); // Ctrl-C: the interrupt ends the process
    // The run never started (409 busy, 503): there is nothing to follow.
    turn.abort.abort();
    throw err;
  }
  // The reply is complete; the session's stream ends with the run's terminal event.
  let finished = await Promise.race([events.then(() => true), sleep(30_000, false, { ref: false })]);
  // Paused for tool decisions: the answers and the resumed run take what they take.
  if (!finished && turn.paused) finished = await events.then(() => true);
  if (!finished && !io.json) io.err("(the session's events did not end within 30 s; see platform sessions get)");
  turn.abort.abort();
  interrupt.current = undefined;
  // The router's invoke ends at the pause without a terminal event of its own: the events stream had the rest.
  if (failure && !turn.paused) throw failure;
  await events.catch((err: unknown) => {
    if (turn.paused) throw err;
  });
}

/**
 * The session's events after `turn.before`, shown as they come, until the
 * run's done or error. A `requires_action` (the run paused on tools the
 * agent asks about) is answered here: y/n per call from stdin, then the
 * resumed run's events follow, its text included (the router's reply
 * ended at the pause).
 */
async function followTurn(client: PlatformClient, turn: Turn, io: Output, stdin: StdinLines): Promise<void> {
  let seen = turn.before;
  const progress = new Progress(io);
  const url = () => `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(turn.sessionId)}/events?after=${seen}`;
  while (!turn.abort.signal.aborted) {
    try {
      const res = await client.send("GET", url(), {
        headers: { accept: "text/event-stream" },
        signal: turn.abort.signal,
      });
      for await (const ev of readSse(res)) {
        const seq = Number(ev.id);
        if (!Number.isFinite(seq) || seq <= seen) continue;
        seen = seq;
        const event = JSON.parse(ev.data) as SessionEvent;
        if (io.json) io.value({ seq, ...event });
        else progress.show(event);
        if (event.type === "text" && turn.paused && !io.json) io.write(event.content ?? "");
        // budget_reached (issue 20): the run ended at one of the session's budgets.
        if (event.type === "done" || event.type === "error" || event.type === "budget_reached") {
          if (turn.paused && !io.json) io.write("\n");
          return;
        }
        if (event.type === "requires_action") {
          turn.paused = true;
          progress.close();
          await answerToolCalls(client, turn.sessionId, event.content ?? "", io, stdin);
        }
      }
    } catch (err) {
      if (turn.abort.signal.aborted) return;
      // The session is gone or the login is: no point in asking again.
      if (err instanceof ApiError && (err.status === 401 || err.status === 403 || err.status === 404)) throw err;
    }
    // No run yet (the stream replayed and closed): look again shortly.
    await sleep(100, undefined, { signal: turn.abort.signal }).catch(() => {});
  }
}

type PendingCall = { toolUseId: string; name: string; input?: unknown; kind?: string };

type Decision =
  | { toolUseId: string; decision: "allow" | "deny"; message?: string }
  | { toolUseId: string; decision: "result"; result: { content: string; isError: boolean } };

/**
 * Asks y/n for each pending call on stderr, reading the answers from stdin
 * (`yes | platform chat ...` allows every call; `n <reason>` denies with the
 * reason as the message to the model), and sends them in one request. When
 * stdin has ended, the calls left are denied: nothing runs unasked. A call
 * of one of the agent's client tools (`kind` `client`) is not allowed but
 * answered: its result is the next line (`!error <text>` for a failed
 * result, an empty line denies it).
 */
async function answerToolCalls(
  client: PlatformClient,
  sessionId: string,
  content: string,
  io: Output,
  stdin: StdinLines,
): Promise<void> {
  let calls: PendingCall[] = [];
  try {
    calls = (JSON.parse(content) as { calls?: PendingCall[] }).calls ?? [];
  } catch {
    // Not what this CLI knows: nothing to ask; the session stays waiting.
  }
  if (calls.length === 0) return;
  const decisions: Decision[] = [];
  for (const call of calls) {
    if (call.kind === "client") {
      decisions.push(await clientToolAnswer(call, io, stdin));
      continue;
    }
    io.err(`\n⏸ ${call.name} ${JSON.stringify(call.input ?? {})}`);
    process.stderr.write("  allow this call? [y/N, or n <reason>] ");
    const line = await stdin.next();
    if (line === undefined) {
      io.err("(no answer: stdin ended; denied)");
      decisions.push({ toolUseId: call.toolUseId, decision: "deny", message: "no answer: the user's input ended" });
      continue;
    }
    const answer = line.trim();
    if (/^y(es)?$/i.test(answer)) {
      if (!process.stdin.isTTY) io.err("y");
      decisions.push({ toolUseId: call.toolUseId, decision: "allow" });
    } else {
      const reason = /^n(o)?\s+(.+)$/i.exec(answer)?.[2]?.trim();
      if (!process.stdin.isTTY) io.err(answer || "n");
      decisions.push({ toolUseId: call.toolUseId, decision: "deny", ...(reason ? { message: reason } : {}) });
    }
  }
  const res = await client.request<{ resumed?: boolean; pending?: PendingCall[] }>(
    "POST",
    `${client.endpoints.agents}/v1/sessions/${encodeURIComponent(sessionId)}/tool-decisions`,
    { body: { decisions } },
  );
  if (io.json) io.value({ type: "tool_decisions", decisions, resumed: res.resumed ?? false });
}

/**
 * The answer to a client tool's call, read from stdin: the line is the
 * tool's result for the model; `!error <text>` a failed result; an empty
 * line (or stdin ended) denies the call. Answering `y` would be refused
 * (409 client_tool_needs_result): the CLI never sends allow for these.
 */
async function clientToolAnswer(call: PendingCall, io: Output, stdin: StdinLines): Promise<Decision> {
  io.err(`\n⏸ client tool ${call.name} ${JSON.stringify(call.input ?? {})}`);
  process.stderr.write("  its result? [one line; !error <text> for a failure; empty denies] ");
  const line = await stdin.next();
  if (line === undefined) {
    io.err("(no answer: stdin ended; denied)");
    return { toolUseId: call.toolUseId, decision: "deny", message: "no answer: the user's input ended" };
  }
  const answer = line.replace(/\r$/, "");
  if (!process.stdin.isTTY) io.err(answer);
  if (answer.trim() === "") return { toolUseId: call.toolUseId, decision: "deny" };
  const failed = /^!error\s*([\s\S]*)$/.exec(answer);
  return {
    toolUseId: call.toolUseId,
    decision: "result",
    result: failed ? { content: failed[1] ?? "", isError: true } : { content: answer, isError: false },
  };
}

/**
 * Tool calls and results on stderr, and the running tool's output as a
 * progress line: on a terminal one line rewritten in place (its latest
 * output line), else each output line prefixed with `│`.
 */
class Progress {
  #open = false;
  #partial = "";
  constructor(private readonly io: Output) {}

  show(e: SessionEvent): void {
    switch (e.type) {
      case "tool_use":
        this.io.err(`\n⚙ ${e.content ?? ""}`);
        break;
      case "tool_output":
        this.#output(e.content ?? "");
        break;
      case "tool_result":
        this.close();
        this.io.err(`${e.isError ? "✗" : "↳"} ${(e.content ?? "").trimEnd()}`);
        break;
      case "error":
        this.close();
        break;
    }
  }

  #output(content: string): void {
    let chunk: { stdout?: string; stderr?: string; droppedBytes?: number; truncated?: boolean };
    try {
      chunk = JSON.parse(content);
    } catch {
      return;
    }
    const text = `${chunk.stdout ?? ""}${chunk.stderr ?? ""}`;
    if (process.stderr.isTTY) {
      const last =
        `${this.#partial}${text}`
          .split("\n")
          .filter((l) => l.trim() !== "")
          .at(-1) ?? "";
      this.#partial = "";
      const width = Math.max(20, (process.stderr.columns ?? 80) - 4);
      if (last) process.stderr.write(`\r\x1b[2K│ ${last.slice(0, width)}`);
      this.#open = true;
      return;
    }
    const lines = `${this.#partial}${text}`.split("\n");
    this.#partial = lines.pop() ?? "";
    for (const line of lines) this.io.err(`│ ${line}`);
    if (chunk.truncated) this.io.err("│ … (more output than is streamed; the result has the head)");
  }

  close(): void {
    if (this.#partial) this.io.err(`│ ${this.#partial}`);
    this.#partial = "";
    if (this.#open && process.stderr.isTTY) process.stderr.write("\r\x1b[2K");
    this.#open = false;
  }
}
