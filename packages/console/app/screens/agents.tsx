import type { Agent, Session } from "@platform/client";
import { useEffect, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import type { Platform } from "../platform.ts";
import { go } from "../route.ts";
import { Table, type TableHead } from "../table.tsx";

const AGENT_TABLE: TableHead = { columns: ["Name", "Slug", "Model"], actions: true, empty: "No agents yet." };

const PAGE = 10;
/** The built-in tools whose calls a permission may hold for approval. */
const TOOLS = ["bash", "read_file", "write_file", "list_files"];

export function AgentsScreen({ platform }: { platform: Platform }) {
  const [agents, setAgents] = useState<Agent[]>([]);
  // Cursors of the pages before this one: "" is the first page.
  const [cursors, setCursors] = useState<string[]>([""]);
  const [next, setNext] = useState<string>();
  const { error, fail, submit } = useAction();
  const [creating, setCreating] = useState(false);
  const after = cursors.at(-1)!;
  useEffect(() => {
    platform.client.agents.list({ limit: PAGE, after: after || undefined }).then((p) => {
      setAgents(p.items);
      setNext(p.next);
    }, fail);
  }, [platform, after]);

  const create = submit(async (f) => {
    const agent = await platform.client.agents.create({
      name: String(f.get("name")),
      slug: String(f.get("slug")),
      model: String(f.get("model")),
      systemPrompt: String(f.get("systemPrompt") ?? ""),
    });
    go(`agents/${agent.id}`);
  });

  return (
    <section>
      <hgroup>
        <h1>Agents</h1>
        <p>Page {cursors.length}</p>
      </hgroup>
      <ErrorAlert message={error} />
      <Table {...AGENT_TABLE} rows={agents}>
        {(a) => (
          <tr key={a.id}>
            <td>
              <a href={`#/agents/${a.id}`}>{a.name}</a>
            </td>
            <td>
              <code>{a.slug}</code>
            </td>
            <td>{a.model}</td>
            <td>
              <a href={`#/chat/${a.id}`}>Chat</a>
            </td>
          </tr>
        )}
      </Table>
      <nav aria-label="Pages" class="pager">
        <button
          type="button"
          class="secondary"
          disabled={cursors.length === 1}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Previous page
        </button>
        <button type="button" class="secondary" disabled={!next} onClick={() => next && setCursors([...cursors, next])}>
          Next page
        </button>
      </nav>
      {creating ? (
        <article>
          <h2>New agent</h2>
          <form onSubmit={create}>
            <div class="grid">
              <label>
                Name
                <input name="name" required maxLength={100} />
              </label>
              <label>
                Slug
                <input name="slug" required pattern="[a-z0-9][a-z0-9-]*" maxLength={63} />
              </label>
            </div>
            <label>
              Model
              <input name="model" required defaultValue="dev/echo" />
            </label>
            <label>
              System prompt
              <textarea name="systemPrompt" rows={3} />
            </label>
            <button type="submit">Create agent</button>
          </form>
        </article>
      ) : (
        <button type="button" onClick={() => setCreating(true)}>
          New agent
        </button>
      )}
    </section>
  );
}

export function AgentScreen({ platform, id }: { platform: Platform; id: string }) {
  const [agent, setAgent] = useState<Agent>();
  const [sessions, setSessions] = useState<Session[]>([]);
  const { error, fail, attempt, submit } = useAction();
  const [saved, setSaved] = useState("");
  useEffect(() => {
    platform.client.agents.get(id).then(setAgent, fail);
    platform.client.sessions.list({ agentId: id, limit: 50 }).then((p) => setSessions(p.items), fail);
  }, [platform, id]);

  const save = submit(async (f) => {
    setSaved("");
    const toolPermissions: Record<string, string> = {};
    for (const t of TOOLS) toolPermissions[t] = String(f.get(`perm-${t}`) ?? "allow");
    const mcpServers = [];
    const mcpName = String(f.get("mcpName") ?? "").trim();
    if (mcpName) {
      const headers: Record<string, string> = {};
      for (const line of String(f.get("mcpHeaders") ?? "").split("\n")) {
        const at = line.indexOf(":");
        if (at > 0) headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      mcpServers.push({ name: mcpName, url: String(f.get("mcpUrl") ?? ""), headers });
    }
    const res = await platform.client.rpc.agents.updateAgent({
      id,
      name: String(f.get("name")),
      model: String(f.get("model")),
      systemPrompt: String(f.get("systemPrompt")),
      toolPermissions,
      mcpServers,
    });
    setAgent(res.agent);
    setSaved("Saved.");
  });
  const removeMcp = (name: string) =>
    attempt(async () => {
      const res = await platform.client.rpc.agents.updateAgent({ id, mcpServers: [{ name, url: "" }] });
      setAgent(res.agent);
    });
  const newChat = () =>
    attempt(async () => {
      const s = await platform.client.sessions.create(id);
      go(`chat/${id}/${s.id}`);
    });

  if (!agent) return <p aria-busy="true">{error || "Loading agent…"}</p>;
  return (
    <section>
      <hgroup>
        <h1>{agent.name}</h1>
        <p>
          <code>{agent.slug}</code> · {agent.model}
        </p>
      </hgroup>
      <button type="button" onClick={newChat}>
        New chat with {agent.name}
      </button>
      <ErrorAlert message={error} />
      <article>
        <h2>Settings</h2>
        <form onSubmit={save} key={agent.updatedAt?.seconds}>
          <div class="grid">
            <label>
              Name
              <input name="name" defaultValue={agent.name} required />
            </label>
            <label>
              Model
              <input name="model" defaultValue={agent.model} required />
            </label>
          </div>
          <label>
            System prompt
            <textarea name="systemPrompt" rows={4} defaultValue={agent.systemPrompt} />
          </label>
          <fieldset>
            <legend>Tool permissions</legend>
            <div class="grid perms">
              {TOOLS.map((t) => (
                <label key={t}>
                  {t}
                  {/* Uncontrolled (defaults only): a re-render while editing must not reset the choice. */}
                  <select name={`perm-${t}`}>
                    <option value="allow" selected={(agent.toolPermissions[t] ?? "allow") === "allow"}>
                      allow
                    </option>
                    <option value="ask" selected={agent.toolPermissions[t] === "ask"}>
                      ask first
                    </option>
                  </select>
                </label>
              ))}
            </div>
          </fieldset>
          <fieldset>
            <legend>MCP servers</legend>
            <ul>
              {agent.mcpServers.map((m) => (
                <li key={m.name}>
                  <strong>{m.name}</strong> <code>{m.url}</code>
                  {m.headerNames.length > 0 && <small> headers: {m.headerNames.join(", ")}</small>}{" "}
                  <button type="button" class="outline secondary small" onClick={() => removeMcp(m.name)}>
                    Remove {m.name}
                  </button>
                </li>
              ))}
              {agent.mcpServers.length === 0 && <li>None.</li>}
            </ul>
            <div class="grid">
              <label>
                Add a server: name
                <input name="mcpName" />
              </label>
              <label>
                URL
                <input name="mcpUrl" type="url" placeholder="https://…" />
              </label>
            </div>
            <label>
              Headers (one "Name: value" a line; write-only, never shown again)
              <textarea name="mcpHeaders" rows={2} />
            </label>
          </fieldset>
          <button type="submit">Save agent</button>
          {saved && <p role="status">{saved}</p>}
        </form>
      </article>
      <article>
        <h2>Sessions</h2>
        <ul data-testid="agent-sessions">
          {sessions.map((s) => (
            <li key={s.id}>
              <a href={`#/sessions/${s.id}`}>
                Session <code>{s.id.slice(0, 8)}</code>
              </a>{" "}
              {s.status} · {s.createdAt ? new Date(Number(s.createdAt.seconds) * 1000).toLocaleString() : ""} ·{" "}
              <a href={`#/chat/${id}/${s.id}`}>continue chat</a>
            </li>
          ))}
          {sessions.length === 0 && <li>No sessions yet.</li>}
        </ul>
      </article>
    </section>
  );
}
