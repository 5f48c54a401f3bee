import type { APIKey } from "@platform/client";
import { useEffect, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import type { Platform } from "../platform.ts";
import { type SecretKind, ShownOnce } from "../shown-once.tsx";
import { Table, type TableHead } from "../table.tsx";

const NEW_KEY: SecretKind = { testId: "new-key", valueTestId: "raw-key", copyLabel: "Copy key" };
const KEY_TABLE: TableHead = {
  testId: "keys",
  columns: ["Name", "Prefix", "Scopes", "Last used"],
  actions: true,
  empty: "No keys.",
};

export function KeysScreen({ platform }: { platform: Platform }) {
  const [keys, setKeys] = useState<APIKey[]>([]);
  const [raw, setRaw] = useState<{ name: string; key: string }>();
  const { error, setError, fail, attempt, submit } = useAction();
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    platform.client.apiKeys.list().then(setKeys, fail);
  }, [platform, generation]);

  const create = submit(async (f, form) => {
    const scopes = String(f.get("scope")) === "read" ? ["read"] : undefined;
    const res = await platform.client.apiKeys.create({ name: String(f.get("name")), scopes });
    // Shown once: identity keeps only its hash.
    setRaw({ name: String(f.get("name")), key: res.rawKey });
    form.reset();
    setGeneration((g) => g + 1);
  });
  async function revoke(k: APIKey) {
    if (!confirm(`Revoke the key ${k.name}? Programs using it stop working.`)) return;
    await attempt(async () => {
      await platform.client.apiKeys.revoke(k.id);
      setGeneration((g) => g + 1);
    });
  }

  return (
    <section>
      <h1>API keys</h1>
      {raw && (
        <ShownOnce {...NEW_KEY} value={raw.key} onDone={() => setRaw(undefined)} onError={setError}>
          The key <strong>{raw.name}</strong>. Copy it now: it is not shown again.
        </ShownOnce>
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
      <Table {...KEY_TABLE} rows={keys}>
        {(k) => (
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
        )}
      </Table>
    </section>
  );
}
