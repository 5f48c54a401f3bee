import { type ChatItem, chatItems, type ToolItem, type ViewEvent } from "../events.ts";

/** A session's conversation: messages, the streamed reply, tool calls as collapsible blocks. */
export function ChatLog({
  events,
  onDecide,
  pending,
}: {
  events: ViewEvent[];
  /** Allow or deny a pending call (shown only for calls still pending). */
  onDecide?: (toolUseId: string, decision: "allow" | "deny") => void;
  pending?: Set<string>;
}) {
  const items = chatItems(events);
  return (
    <ol class="chat" aria-label="Conversation" aria-live="polite">
      {items.map((item) => (
        <li key={`${item.kind}-${item.seq}`} class={`chat-${item.kind}`}>
          <Item item={item} onDecide={onDecide} pending={pending} />
        </li>
      ))}
    </ol>
  );
}

function Item({
  item,
  onDecide,
  pending,
}: {
  item: ChatItem;
  onDecide?: (toolUseId: string, decision: "allow" | "deny") => void;
  pending?: Set<string>;
}) {
  switch (item.kind) {
    case "user":
      return (
        <p>
          <span class="who">You</span> {item.text}
        </p>
      );
    case "assistant":
      return (
        <p data-testid="reply">
          <span class="who">Agent</span> {item.text}
        </p>
      );
    case "tool":
      return <Tool item={item} />;
    case "done":
      return (
        <small class="muted">
          done · {item.tokensIn} tokens in, {item.tokensOut} out
        </small>
      );
    case "error":
      return (
        <p role="alert" class="error">
          Error: {item.text}
        </p>
      );
    case "action":
      return (
        <div class="pending" data-testid="requires-action">
          <strong>Waiting for your decision</strong>
          <ul>
            {item.calls.map((c) => (
              <li key={c.toolUseId}>
                <code>{c.name}</code> <code>{JSON.stringify(c.input)}</code>{" "}
                {pending?.has(c.toolUseId) && onDecide ? (
                  // biome-ignore lint/a11y/useSemanticElements: two buttons inline in a list item; a fieldset is a bordered block
                  <span role="group" aria-label={`Decision for ${c.name}`}>
                    <button type="button" class="small" onClick={() => onDecide(c.toolUseId, "allow")}>
                      Approve
                    </button>{" "}
                    <button type="button" class="small secondary" onClick={() => onDecide(c.toolUseId, "deny")}>
                      Deny
                    </button>
                  </span>
                ) : (
                  <small class="muted">answered</small>
                )}
              </li>
            ))}
          </ul>
        </div>
      );
    case "note":
      return <small class="muted">{item.text}</small>;
  }
}

function Tool({ item }: { item: ToolItem }) {
  const command = typeof item.input.command === "string" ? item.input.command : JSON.stringify(item.input);
  const status = !item.result
    ? "running…"
    : item.result.exitCode !== undefined
      ? `exit code ${item.result.exitCode}`
      : item.result.isError
        ? "failed"
        : "done";
  return (
    <details data-testid="tool-call">
      <summary>
        <code>{item.name}</code> <code class="command">{command}</code> <small>{status}</small>
      </summary>
      {item.stdout && (
        <>
          <h4>stdout</h4>
          <pre data-testid="stdout">{item.stdout}</pre>
        </>
      )}
      {item.stderr && (
        <>
          <h4>stderr</h4>
          <pre data-testid="stderr">{item.stderr}</pre>
        </>
      )}
      {item.result && item.result.exitCode === undefined && <pre>{item.result.content}</pre>}
    </details>
  );
}
