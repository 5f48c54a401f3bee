import type { Session } from "@platform/client";
import type { SessionFile } from "@platform/gen/agents/v1/agents_pb";
import type { Usage } from "@platform/gen/agents/v1/usage_pb";
import { useEffect, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import { fromLog, type ViewEvent } from "../events.ts";
import type { Platform } from "../platform.ts";
import { Table, type TableHead } from "../table.tsx";
import { ChatLog } from "./chat-log.tsx";

const FILE_TABLE: TableHead = { testId: "files", columns: ["Path", "Size"], actions: true, empty: "Empty." };

/** Files shown as text up to this size; larger ones are downloaded. */
const VIEW_LIMIT = 256 * 1024;

export function SessionScreen({ platform, id }: { platform: Platform; id: string }) {
  const [session, setSession] = useState<Session>();
  const [events, setEvents] = useState<ViewEvent[]>([]);
  const { error, fail } = useAction();
  const [usage, setUsage] = useState<Usage>();
  useEffect(() => {
    platform.usage.getSessionUsage({ id }).then(
      (r) => setUsage(r.usage),
      () => setUsage(undefined),
    );
    // Every page of the log (GetSession answers 1,000 events at a time).
    platform.client.sessions.get(id).then((res) => {
      setSession(res.session);
      setEvents(res.events.map(fromLog));
    }, fail);
  }, [platform, id]);
  const tokens = events
    .filter((e) => e.type === "done" || e.type === "requires_action")
    .reduce((t, e) => ({ in: t.in + (e.tokensIn ?? 0), out: t.out + (e.tokensOut ?? 0) }), { in: 0, out: 0 });
  const toolCalls = events.filter((e) => e.type === "tool_use").length;
  if (!session) return <p aria-busy="true">{error || "Loading session…"}</p>;
  return (
    <section>
      <hgroup>
        <h1>
          Session <code>{id.slice(0, 8)}</code>
        </h1>
        <p>
          <a href={`#/agents/${session.agentId}`}>its agent</a> ·{" "}
          <a href={`#/chat/${session.agentId}/${id}`}>continue chat</a>
        </p>
      </hgroup>
      <article>
        <h2>Status</h2>
        <dl class="facts" data-testid="session-status">
          <dt>Run</dt>
          <dd>{session.status}</dd>
          <dt>Sandbox</dt>
          <dd>{session.sandboxId ? <code>{session.sandboxId}</code> : "none yet (made by the first tool call)"}</dd>
          <dt>Events</dt>
          <dd>{String(session.lastSeq)}</dd>
          <dt>Tokens</dt>
          <dd>
            {tokens.in} in, {tokens.out} out
          </dd>
          <dt>Tool calls</dt>
          <dd>{toolCalls}</dd>
          {usage && (
            <>
              <dt>Sandbox CPU</dt>
              <dd>{String(usage.sandboxCpuMs)} ms</dd>
              <dt>Sandbox wall time</dt>
              <dd>{String(usage.sandboxWallMs)} ms</dd>
              <dt>Model calls</dt>
              <dd>{String(usage.modelCalls)}</dd>
            </>
          )}
        </dl>
      </article>
      <article>
        <h2>Event log</h2>
        <ChatLog events={events} />
      </article>
      <Files platform={platform} id={id} />
      <ErrorAlert message={error} />
    </section>
  );
}

function Files({ platform, id }: { platform: Platform; id: string }) {
  const [dir, setDir] = useState("");
  const [files, setFiles] = useState<SessionFile[]>();
  const [open, setOpen] = useState<{ path: string; text: string }>();
  const { error, fail, attempt, submit } = useAction();
  const [generation, setGeneration] = useState(0);
  const rpc = platform.client.rpc.sessions;
  useEffect(() => {
    setFiles(undefined);
    rpc.listSessionFiles({ id, path: dir }).then((r) => setFiles(r.items), fail);
  }, [platform, id, dir, generation]);

  async function read(path: string): Promise<Uint8Array> {
    const chunks: Uint8Array[] = [];
    for (let offset = 0n; ; ) {
      const r = await rpc.readSessionFile({ id, path, offset, maxBytes: 8n * 1024n * 1024n });
      chunks.push(r.data);
      offset += BigInt(r.data.length);
      if (r.eof || r.data.length === 0) break;
    }
    const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
  const view = (f: SessionFile) =>
    attempt(async () => {
      if (Number(f.size) > VIEW_LIMIT) return download(f);
      const path = dir ? `${dir}/${f.path}` : f.path;
      setOpen({ path, text: new TextDecoder().decode(await read(path)) });
    });
  const download = (f: SessionFile) =>
    attempt(async () => {
      const data = await read(dir ? `${dir}/${f.path}` : f.path);
      const url = URL.createObjectURL(new Blob([data as BlobPart]));
      const a = document.createElement("a");
      a.href = url;
      a.download = f.path.split("/").pop() ?? "file";
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
  const upload = submit(async (_, form) => {
    const input = form.elements.namedItem("file") as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    const bytes = new Uint8Array(await file.arrayBuffer());
    const path = dir ? `${dir.replace(/\/$/, "")}/${file.name}` : file.name;
    const step = 8 * 1024 * 1024;
    for (let at = 0; at === 0 || at < bytes.length; at += step) {
      await rpc.writeSessionFile({ id, path, data: bytes.subarray(at, at + step), append: at > 0 });
    }
    form.reset();
    setGeneration((g) => g + 1);
  });

  const parent = dir.split("/").slice(0, -1).join("/");
  // Entries are named relative to the listed directory.
  const full = (f: SessionFile) => (dir ? `${dir}/${f.path}` : f.path);
  return (
    <article>
      <h2>Workspace files</h2>
      <p>
        <code>/workspace/{dir}</code>{" "}
        {dir && (
          <button type="button" class="outline secondary small" onClick={() => setDir(parent)}>
            Up
          </button>
        )}
      </p>
      <Table {...FILE_TABLE} rows={files}>
        {(f) => (
          <tr key={f.path}>
            <td>
              {f.isDir ? (
                <button type="button" class="link" onClick={() => setDir(full(f))}>
                  {f.path}/
                </button>
              ) : (
                <code>{f.path}</code>
              )}
            </td>
            <td>{f.isDir ? "" : String(f.size)}</td>
            <td>
              {!f.isDir && (
                <>
                  <button type="button" class="small" onClick={() => view(f)}>
                    View {f.path}
                  </button>{" "}
                  <button type="button" class="small secondary" onClick={() => download(f)}>
                    Download {f.path}
                  </button>
                </>
              )}
            </td>
          </tr>
        )}
      </Table>
      {!files && !error && <p aria-busy="true">Loading files…</p>}
      {open && (
        <figure>
          <figcaption>
            <code>{open.path}</code>{" "}
            <button type="button" class="outline secondary small" onClick={() => setOpen(undefined)}>
              Close
            </button>
          </figcaption>
          <pre data-testid="file-text">{open.text}</pre>
        </figure>
      )}
      <form onSubmit={upload} class="composer">
        <label class="grow">
          Upload a file here
          <input type="file" name="file" required />
        </label>
        <button type="submit">Upload</button>
      </form>
      <ErrorAlert message={error} />
    </article>
  );
}
