import type { Tokens } from "@platform/client";
import { SubmitButton, useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import { type Platform, tokensOf } from "../platform.ts";

/**
 * An invitation's link (`#/accept/<token>`): a new person chooses a name and
 * a password; someone who has an account gives its current password
 * (identity's AcceptInvitation, no credential: the token is one). The answer
 * is a login in the invitation's organization.
 */
export function AcceptScreen({
  platform,
  token,
  signedIn,
  onAccepted,
}: {
  platform: Platform;
  token: string | undefined;
  signedIn: boolean;
  onAccepted: (t: Tokens) => void;
}) {
  const { error, busy, submit } = useAction();
  const accept = submit(async (f) => {
    if (!token) return;
    const res = await platform.members.acceptInvitation({
      token,
      email: String(f.get("email") ?? "").trim(),
      name: String(f.get("name") ?? "").trim(),
      password: String(f.get("password") ?? ""),
    });
    onAccepted(tokensOf(res.token!));
  });
  return (
    <main class="container narrow">
      <article>
        <header>
          <h1>Join an organization</h1>
          <p>You were invited to the agent platform.</p>
        </header>
        {!token ? (
          <p role="alert" class="error">
            This link holds no invitation. Ask the person who invited you for a new one.
          </p>
        ) : (
          <form onSubmit={accept}>
            {signedIn && (
              <p class="muted" data-testid="accept-signed-in">
                Accepting signs this tab in as the invited account.
              </p>
            )}
            <label>
              Email
              <input name="email" type="email" autocomplete="username" required />
              <small>The address the invitation was sent to.</small>
            </label>
            <label>
              Your name
              <input name="name" autocomplete="name" maxLength={200} />
              <small>For a new account (default: the email's first part).</small>
            </label>
            <label>
              Password
              <input name="password" type="password" autocomplete="new-password" required minLength={8} />
              <small>
                New to the platform: choose one (at least 8 characters). Already have an account: its password.
              </small>
            </label>
            <ErrorAlert message={error} />
            <SubmitButton busy={busy}>Accept the invitation</SubmitButton>
          </form>
        )}
      </article>
    </main>
  );
}
