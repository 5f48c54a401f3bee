import type { APIKey } from "@platform/client";
import { useEffect, useState } from "preact/hooks";
import { messageOf, type Platform } from "../platform.ts";
import { ErrorAlert } from "../error-alert.tsx";

export function KeysScreen({ platform }: { platform: Platform }) {
  const [keys, setKeys] = useState<APIKey[]>([]);
  const [raw, setRaw] = useState<{ name: string; key: string }>();
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState("");
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    platform.client.apiKeys.list().then(setKeys, (e) => setError(messageOf(e)));
  }, [platform, generation]);

  async function create(e: Event) {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const f = new FormData(form);
    setError("");
    setCopied(false);
    try {
      const scopes = String(f.get("scope")) === "read" ? ["read"] : undefined;
      const res = await platform.client.apiKeys.create({ name: String(f.get("name")), scopes });
      // Shown once: identity keeps only its hash.
      setRaw({ name: String(f.get("name")), key: res.rawKey });
      form.reset();
      setGeneration((g) => g + 1);
    } catch (err) {
      setError(messageOf(err));
    }
  }
  async function copy() {
    if (!raw) return;
    try {
      await navigator.clipboard.writeText(raw.key);
      setCopied(true);
    } catch (err) {
      setError(`Copy failed: ${messageOf(err)}`);
    }
  }
  async function revoke(k: APIKey) {
    if (!confirm(`Revoke the key ${k.name}? Programs using it stop working.`)) return;
    try {
      await platform.client.apiKeys.revoke(k.id);
      setGeneration((g) => g + 1);
    } catch (err) {
      setError(messageOf(err));
    }
  }

  return (
    <section>
      <h1>API keys</h1>
      {raw && (
        <article class="secret" data-testid="new-key">
          <p>
            The key <strong>{raw.name}</strong>. Copy it now: it is not shown again.
          </p>
          <pre>
            <code data-testid="raw-key">{raw.key}</code>
          </pre>
          <button type="button" onClick={copy}>
            {copied ? "Copied" : "Copy key"}
          </button>{" "}
          <button type="button" class="secondary outline" onClick={() => setRaw(undefined)}>
            Done
          </button>
        </article>
      )}
      <form onSubmit={create} class="grid">
        <label>
          Name
          <input name="name" required maxLength={100} />
        </label>
        <label>
          Scope
          <select name="scope">
            <option value="all">read and write</option>
            <option value="read">read only</option>
          </select>
        </label>
        <div>
          <button type="submit">Create key</button>
        </div>
      </form>
      <ErrorAlert message={error} />
      <div class="table-scroll">
        <table data-testid="keys">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Scopes</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.length === 0 && (
              <tr>
                <td colSpan={5}>No keys.</td>
              </tr>
            )}
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name}</td>
                <td>
                  <code>{k.keyPrefix}</code>
                </td>
                <td>{k.scopes.join(", ")}</td>
                <td>{k.lastUsedAt ? new Date(Number(k.lastUsedAt.seconds) * 1000).toLocaleString() : "never"}</td>
                <td>
                  <button type="button" class="small secondary" onClick={() => revoke(k)}>
                    Revoke {k.name}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
