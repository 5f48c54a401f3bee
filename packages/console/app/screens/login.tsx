import type { Tokens } from "@platform/client";
import { useState } from "preact/hooks";
import { messageOf, type Platform } from "../platform.ts";
import { ErrorAlert } from "../error-alert.tsx";

export function Login({ platform, onSignedIn }: { platform: Platform; onSignedIn: (t: Tokens) => void }) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    setBusy(true);
    setError("");
    try {
      const tokens = await platform.client.login(String(form.get("email")), String(form.get("password")), {
        deviceLabel: "web console",
      });
      onSignedIn(tokens);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  }
  return (
    <main class="container narrow">
      <article>
        <header>
          <h1>Sign in</h1>
          <p>Agent platform console</p>
        </header>
        <form onSubmit={submit}>
          <label>
            Email
            <input name="email" type="email" autocomplete="username" required />
          </label>
          <label>
            Password
            <input name="password" type="password" autocomplete="current-password" required />
          </label>
          <ErrorAlert message={error} />
          <button type="submit" aria-busy={busy} disabled={busy}>
            Sign in
          </button>
        </form>
      </article>
    </main>
  );
}
