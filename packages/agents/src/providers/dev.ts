import { PlatformError } from "@platform/errors";
import type { ModelEvent, ModelMessage, ModelProvider, ModelRequest, ToolCall } from "./provider.ts";

/**
 * `dev/...`: a deterministic built-in model for local use and tests. It is NOT
 * an LLM and understands nothing; it follows fixed rules on the last message:
 *
 * - a user message `run: <command>` or `/bash <command>` → a `bash` tool call
 *   with `{"command": "<command>"}`;
 * - `/read <path>` → `read_file`; `/write <path> <text>` → `write_file`;
 *   `/ls [path]` → `list_files` (path defaults to `.`);
 * - `/call <tool> <JSON object>` → a call of that tool (any name: a client
 *   tool's, an MCP tool's) with that input;
 * - `/fail <text>` → streams `<text>` then fails mid-stream (to exercise
 *   error handling);
 * - a tool result (the last message is role tool) → a text summary of it;
 * - anything else → `echo: <the user's text>`.
 *
 * Text is streamed in fragments of whole words, up to 32 characters each. Token counts are word counts:
 * input = words of the system prompt and every message, output = words
 * produced (tool-call input JSON included).
 */
export class DevModel implements ModelProvider {
  async start(request: ModelRequest, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    if (signal.aborted) throw PlatformError.unavailable("model call aborted");
    return this.#run(request, signal);
  }

  async *#run(request: ModelRequest, signal: AbortSignal): AsyncGenerator<ModelEvent> {
    const inputTokens = words(request.system) + request.messages.reduce((n, m) => n + words(messageText(m)), 0);
    yield { type: "usage", inputTokens, outputTokens: 0 };
    const last = request.messages.at(-1);
    const reply = decide(last, request.messages.length);
    let outputTokens = 0;
    for (const fragment of fragments(reply.text)) {
      if (signal.aborted) return;
      outputTokens += words(fragment);
      yield { type: "text", text: fragment };
      await Promise.resolve();
    }
    if (reply.fail) throw new Error("dev model: failure requested with /fail");
    if (reply.call) {
      outputTokens += words(JSON.stringify(reply.call.input)) + 1;
      yield { type: "tool_use", call: reply.call };
    }
    yield { type: "usage", inputTokens, outputTokens };
    yield { type: "stop", reason: reply.call ? "tool_use" : "end_turn" };
  }
}

type Reply = { text: string; call?: ToolCall; fail?: boolean };

function decide(last: ModelMessage | undefined, position: number): Reply {
  if (!last) return { text: "echo:" };
  const id = `toolu_dev_${position}`;
  if (last.role === "tool") return { text: summarize(last.content, last.isError) };
  const text = last.content.trim();
  let m: RegExpExecArray | null;
  if ((m = /^(?:run:|\/bash)\s+([\s\S]+)$/.exec(text)))
    return { text: "", call: { id, name: "bash", input: { command: m[1]!.trim() } } };
  if ((m = /^\/read\s+(\S+)\s*$/.exec(text)))
    return { text: "", call: { id, name: "read_file", input: { path: m[1]! } } };
  if ((m = /^\/write\s+(\S+)\s([\s\S]*)$/.exec(text))) {
    return { text: "", call: { id, name: "write_file", input: { path: m[1]!, content: m[2]! } } };
  }
  if ((m = /^\/ls(?:\s+(\S+))?\s*$/.exec(text)))
    return { text: "", call: { id, name: "list_files", input: { path: m[1] ?? "." } } };
  if ((m = /^\/call\s+([A-Za-z0-9_-]{1,64})\s+(\{[\s\S]*\})\s*$/.exec(text))) {
    try {
      const input = JSON.parse(m[2]!) as unknown;
      if (typeof input === "object" && input !== null && !Array.isArray(input))
        return { text: "", call: { id, name: m[1]!, input: input as Record<string, unknown> } };
    } catch {
      // Not JSON: echoed like any other text.
    }
  }
  if ((m = /^\/fail\s*([\s\S]*)$/.exec(text))) return { text: m[1] ?? "", fail: true };
  return { text: `echo: ${text}` };
}

function summarize(content: string, isError: boolean): string {
  try {
    const parsed = JSON.parse(content) as { exitCode?: number; stdout?: string; stderr?: string; error?: string };
    if (typeof parsed.exitCode === "number") {
      const out = [parsed.stdout, parsed.stderr].filter(Boolean).join("");
      return `The command exited with code ${parsed.exitCode}.${out ? `\nOutput:\n${out}` : ""}`;
    }
    if (parsed.error) return `The tool failed: ${parsed.error}`;
  } catch {
    // Not JSON: summarize the raw text.
  }
  return `${isError ? "The tool failed" : "The tool returned"}: ${content}`;
}

function messageText(m: ModelMessage): string {
  if (m.role === "assistant")
    return m.content + m.toolCalls.map((c) => ` ${c.name} ${JSON.stringify(c.input)}`).join("");
  return m.content;
}

/**
 * The words of `text`: its runs of characters other than whitespace (what
 * `text.split(/\s+/).filter(Boolean).length` counts), counted without making
 * them. Every call counts the words of the whole conversation, so splitting
 * made ~0.5 MB of strings and arrays per call of a 12-turn session under the
 * mixed-load bench figure.
 */
function words(text: string): number {
  let n = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const space = isSpace(text.charCodeAt(i));
    if (!space && !inWord) n++;
    inWord = !space;
  }
  return n;
}

/** Whether a UTF-16 code unit is whitespace as a regular expression's `\s` matches it. */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * Splits text into fragments of whole words of up to 32 characters (a
 * longer word is a fragment of its own), keeping all whitespace.
 */
function fragments(text: string): string[] {
  const out: string[] = [];
  for (const word of text.match(/\s*\S+\s*/g) ?? (text ? [text] : [])) {
    if (out.length > 0 && out[out.length - 1]!.length + word.length <= 32) out[out.length - 1] += word;
    else out.push(word);
  }
  return out;
}
