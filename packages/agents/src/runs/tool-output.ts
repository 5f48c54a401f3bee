import { StringDecoder } from "node:string_decoder";
import { clip } from "../tools/toolbox.ts";

/** Bounds on one tool call's live output events. */
export type ToolOutputLimits = {
  /** At most one event per this many ms per tool call (plus the last one when the tool ends). */
  intervalMs: number;
  /** Output bytes in one event; the rest of that interval's output is counted, not sent. */
  eventBytes: number;
  /** Output bytes over the whole call; past it nothing more is sent but the count. */
  callBytes: number;
};

export const TOOL_OUTPUT_LIMITS: ToolOutputLimits = { intervalMs: 200, eventBytes: 4096, callBytes: 64 * 1024 };

type Stream = "stdout" | "stderr";

/**
 * Turns one running tool's output chunks into `tool_output` event contents
 * (`{"stdout"?, "stderr"?, "droppedBytes"?, "truncated"?}`), so a client can
 * show progress while the model still gets only the capped `tool_result`.
 * Chunks are joined per interval: a command printing thousands of lines
 * costs a few events a second, and a call's events never hold more than
 * `callBytes` of output, whatever it prints. Text is decoded per stream, so a
 * character split across chunks is never cut in two.
 */
export class ToolOutput {
  readonly #decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
  #pending = { stdout: "", stderr: "" };
  #pendingBytes = 0;
  /** Output bytes not sent since the last event. */
  #dropped = 0;
  /** Output bytes sent by this call's events so far. */
  #sent = 0;
  /** The call reached callBytes: the event saying so went (or goes) out. */
  #capped = false;
  #cappedSent = false;
  #lastEmit = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(
    private readonly emit: (content: string) => void,
    private readonly limits: ToolOutputLimits = TOOL_OUTPUT_LIMITS,
  ) {}

  add(stream: Stream, data: Uint8Array): void {
    if (this.#closed) return;
    const text = this.#decoders[stream].write(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    this.#take(stream, text);
    this.#schedule();
  }

  /** The tool ended: sends what is left at once (before its tool_result) and stops. */
  end(): void {
    if (this.#closed) return;
    for (const stream of ["stdout", "stderr"] as const) this.#take(stream, this.#decoders[stream].end());
    this.#flush();
    this.close();
  }

  /** Stops without sending anything more (the run was cancelled or failed). */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #take(stream: Stream, text: string): void {
    if (text === "") return;
    const bytes = Buffer.byteLength(text);
    const room = Math.max(
      0,
      Math.min(this.limits.eventBytes - this.#pendingBytes, this.limits.callBytes - this.#sent - this.#pendingBytes),
    );
    const kept = bytes <= room ? text : clip(text, room);
    const keptBytes = Buffer.byteLength(kept);
    this.#pending[stream] += kept;
    this.#pendingBytes += keptBytes;
    this.#dropped += bytes - keptBytes;
    if (this.#sent + this.#pendingBytes >= this.limits.callBytes) this.#capped = true;
  }

  #schedule(): void {
    if (this.#timer || this.#closed) return;
    if (this.#cappedSent && this.#pendingBytes === 0) return; // only the final event reports what followed the cap
    const wait = Math.max(0, this.#lastEmit + this.limits.intervalMs - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#flush();
    }, wait);
    this.#timer.unref?.();
  }

  #flush(): void {
    if (this.#pendingBytes === 0 && this.#dropped === 0) return;
    const content: Record<string, unknown> = {};
    if (this.#pending.stdout) content.stdout = this.#pending.stdout;
    if (this.#pending.stderr) content.stderr = this.#pending.stderr;
    if (this.#dropped > 0) content.droppedBytes = this.#dropped;
    if (this.#capped && !this.#cappedSent) {
      content.truncated = true;
      this.#cappedSent = true;
    }
    this.#sent += this.#pendingBytes;
    this.#pending = { stdout: "", stderr: "" };
    this.#pendingBytes = 0;
    this.#dropped = 0;
    this.#lastEmit = Date.now();
    this.emit(JSON.stringify(content));
  }
}
