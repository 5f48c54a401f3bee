import type { Tokens } from "@platform/client";
import { SubmitButton, useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import type { Platform } from "../platform.ts";

export function Login({ platform, onSignedIn }: { platform: Platform; onSignedIn: (t: Tokens) => void }) {
  const { error, busy, submit } = useAction();
  const signIn = submit(async (form) => {
    const tokens = await platform.client.login(String(form.get("email")), String(form.get("password")), {
      deviceLabel: "web console",
    });
    onSignedIn(tokens);
  });
  return (
    <main class="container narrow">
      <article>
        <header>
          <h1>Sign in</h1>
          <p>Agent platform console</p>
        </header>
        <form onSubmit={signIn}>
          <label>
            Email
            <input name="email" type="email" autocomplete="username" required />
          </label>
          <label>
            Password
            <input name="password" type="password" autocomplete="current-password" required />
          </label>
          <ErrorAlert message={error} />
          <SubmitButton busy={busy}>Sign in</SubmitButton>
        </form>
      </article>
    </main>
  );
}
