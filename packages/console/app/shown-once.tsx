import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { messageOf } from "./platform.ts";

/** What kind of secret: its test ids and its copy button's name. */
export type SecretKind = { testId: string; valueTestId: string; copyLabel: string };

/**
 * A secret the platform answers once (a new API key, an invitation link):
 * what it is (`children`), the value, a copy button ("Copied" once this
 * value is on the clipboard) and Done, which hides it.
 */
export function ShownOnce({
  testId,
  valueTestId,
  value,
  copyLabel,
  onDone,
  onError,
  children,
}: SecretKind & {
  value: string;
  onDone: () => void;
  /** A failed copy's message. */
  onError: (message: string) => void;
  children: ComponentChildren;
}) {
  const [copied, setCopied] = useState<string>();
  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(value);
    } catch (err) {
      onError(`Copy failed: ${messageOf(err)}`);
    }
  }
  return (
    <article class="secret" data-testid={testId}>
      <p>{children}</p>
      <pre>
        <code data-testid={valueTestId}>{value}</code>
      </pre>
      <button type="button" onClick={copy}>
        {copied === value ? "Copied" : copyLabel}
      </button>{" "}
      <button type="button" class="secondary outline" onClick={onDone}>
        Done
      </button>
    </article>
  );
}
