import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { messageOf } from "./platform.ts";

/**
 * A screen's calls and their failure: `error` is the last failed call's
 * message (for ErrorAlert), `busy` is true while an action runs. `attempt`
 * clears the error, runs the call and shows its failure; `submit` does the
 * same for a form's submit event (the call gets the form's data and the form);
 * `fail` shows a failure (a load's rejection).
 */
export function useAction() {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const fail = (err: unknown) => setError(messageOf(err));
  async function attempt(what: () => Promise<unknown>): Promise<void> {
    setError("");
    setBusy(true);
    try {
      await what();
    } catch (err) {
      fail(err);
    } finally {
      setBusy(false);
    }
  }
  const submit = (what: (data: FormData, form: HTMLFormElement) => Promise<unknown>) => (e: Event) => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    return attempt(() => what(new FormData(form), form));
  };
  return { error, setError, fail, busy, attempt, submit };
}

/** A form's submit button, marked busy and disabled while its call runs. */
export function SubmitButton({ busy, children }: { busy: boolean; children: ComponentChildren }) {
  return (
    <button type="submit" aria-busy={busy} disabled={busy}>
      {children}
    </button>
  );
}
