import type { Agent, ChatEvent } from "@platform/client";
import { useEffect, useRef, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import { fromLog, fromStream, merge, type ViewEvent } from "../events.ts";
import type { Platform } from "../platform.ts";
import { go } from "../route.ts";
import { ChatLog } from "./chat-log.tsx";

export function ChatScreen({
  platform,
  agentId,
  sessionId,
}: {
  platform: Platform;
  agentId?: string;
  sessionId?: string;
}) {
  const [agents, setAgents] = useState<Agent[]>([]);
  const { error, fail, attempt } = useAction();
  useEffect(() => {
    platform.client.agents.list({ limit: 100 }).then((p) => setAgents(p.items), fail);
  }, [platform]);

  const newSession = () =>
    attempt(async () => {
      if (!agentId) return;
      const s = await platform.client.sessions.create(agentId);
      go(`chat/${agentId}/${s.id}`);
    });

  return (
    <section>
      <h1>Chat</h1>
      <div class="grid chat-pick">
        <label>
          Agent
          <select
            aria-label="Agent"
            value={agentId ?? ""}
            onChange={(e) => go(`chat/${(e.target as HTMLSelectElement).value}`)}
          >
            <option value="" disabled>
              Pick an agent
            </option>
            {agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name} ({a.slug})
              </option>
            ))}
          </select>
        </label>
        <div>
          <button type="button" disabled={!agentId} onClick={newSession}>
            New session
          </button>
        </div>
      </div>
      <ErrorAlert message={error} />
      {sessionId && <Conversation key={sessionId} platform={platform} id={sessionId} />}
    </section>
  );
}

function Conversation({ platform, id }: { platform: Platform; id: string }) {
  const [events, setEvents] = useState<ViewEvent[]>([]);
  // Streams followed now: a send that interrupts a run is followed beside the run it stops.
  const [active, setActive] = useState(0);
  const running = active > 0;
  const [pending, setPending] = useState<Set<string>>(new Set());
  const { error, setError, fail, attempt } = useAction();
  const abort = useRef<AbortController>();
  const add = (more: ViewEvent[]) => setEvents((all) => merge(all, more));

  /** Shows a stream's events as they come, until the run ends or pauses. */
  async function follow(stream: AsyncGenerator<ChatEvent>, onQueued?: () => void) {
    setActive((n) => n + 1);
    try {
      for await (const e of stream) {
        if (e.type === "other" && e.name === "message_queued") onQueued?.();
        add([fromStream(e)]);
      }
    } catch (err) {
      if (!abort.current?.signal.aborted) fail(err);
    } finally {
      setActive((n) => n - 1);
      await refreshPending();
    }
  }
  async function refreshPending() {
    try {
      // The pending calls come with any page: the smallest will do.
      const res = await platform.client.rpc.sessions.getSession({ id, pageSize: 1 });
      setPending(new Set(res.pendingToolCalls.map((c) => c.toolUseId)));
    } catch {
      // The next action shows the error.
    }
  }

  // Opening the session (also after a reload in the middle of a run): its log,
  // then, while a run goes on, its stream from the last seq shown (Last-Event-ID).
  useEffect(() => {
    abort.current = new AbortController();
    const signal = abort.current.signal;
    (async () => {
      try {
        // Every page of the log, then the live stream after its last event.
        const res = await platform.client.sessions.get(id);
        const log = res.events.map(fromLog);
        add(log);
        setPending(new Set(res.pendingToolCalls.map((c) => c.toolUseId)));
        if (res.session?.status === "running") {
          const after = log.at(-1)?.seq ?? 0;
          await follow(platform.client.sessions.events(id, { after, signal }));
        }
      } catch (err) {
        if (!signal.aborted) fail(err);
      }
    })();
    return () => abort.current?.abort();
  }, [platform, id]);

  async function send(e: Event) {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const text = String(new FormData(form).get("message") ?? "").trim();
    if (!text) return;
    form.reset();
    setError("");
    // The user's message is in the log; the stream has only the reply: shown now, replaced by its seq on reload.
    const mine: ViewEvent = {
      seq: (events.at(-1)?.seq ?? 0) + 0.5,
      type: "user",
      content: text,
      toolUseId: "",
      isError: false,
    };
    add([mine]);
    if (running) {
      // Sent while a run holds the session: it stops that run (which ends with an error event) and is taken
      // next. Queued, its stream brings its message_queued event and later its message as a user event of
      // its own seq, which replaces the one shown now. (A run that ended meanwhile: it simply starts.)
      const queued = () => setEvents((all) => all.filter((e) => e !== mine));
      await follow(
        platform.client.sessions.send(id, text, { mode: "interrupt", signal: abort.current?.signal }),
        queued,
      );
      return;
    }
    await follow(platform.client.sessions.send(id, text, { signal: abort.current?.signal }));
  }

  const decide = (toolUseId: string, decision: "allow" | "deny") =>
    attempt(async () => {
      const res = await platform.client.rpc.sessions.submitToolDecisions({ id, decisions: [{ toolUseId, decision }] });
      setPending(new Set(res.pending.map((c) => c.toolUseId)));
      if (res.resumed) await follow(platform.client.sessions.events(id, { after: Number(res.after) }));
    });
  const cancel = () => attempt(() => platform.client.sessions.cancel(id));

  return (
    <article class="conversation">
      <header>
        Session <code>{id.slice(0, 8)}</code> · <a href={`#/sessions/${id}`}>details and files</a>
        {running && <span aria-busy="true"> the agent is working</span>}
      </header>
      <ChatLog events={events} pending={pending} onDecide={decide} />
      <ErrorAlert message={error} />
      <form onSubmit={send} class="composer">
        <label class="grow">
          <span class="visually-hidden">Message</span>
          <input
            name="message"
            placeholder={running ? "A new message interrupts the run" : "Message the agent (try: run: ls -la)"}
            autocomplete="off"
          />
        </label>
        {running ? (
          <>
            <button type="submit" title="Stop the run and send this message instead">
              Interrupt
            </button>
            <button type="button" class="secondary" onClick={cancel}>
              Stop
            </button>
          </>
        ) : (
          <button type="submit">Send</button>
        )}
      </form>
    </article>
  );
}
