import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { ExecStdin, TerminalSize } from "../driver.ts";

/** SendExecInput's `data`: at most this many bytes per call. */
export const MAX_INPUT_CHUNK_BYTES = 64 * 1024;
/** Input queued for an exec and not yet taken by its command: beyond, SendExecInput is RESOURCE_EXHAUSTED. */
export const MAX_INPUT_BUFFERED_BYTES = 1024 * 1024;
/** A terminal's rows and columns: at most this many each. */
export const MAX_TERMINAL_SIDE = 1000;

/**
 * The input of one exec (issue 27): what SendExecInput queued, bounded,
 * until the driver takes it (it takes the next chunk once the command has
 * taken the last, so what is queued here is what the command has not read).
 */
export class ExecInputChannel implements ExecStdin {
  private readonly chunks: Uint8Array[] = [];
  private queued = 0;
  private eof = false;
  private ended = false;
  private waiter?: () => void;
  private readonly resizeListeners = new Set<(size: TerminalSize) => unknown>();

  constructor(readonly terminal: boolean) {}

  /** SendExecInput: queues data, then closes the input when eof. */
  push(data: Uint8Array, eof: boolean): void {
    if (this.ended)
      throw PlatformError.failedPrecondition("the command no longer reads its input", ComputeReason.stdinClosed);
    if (this.eof)
      throw PlatformError.failedPrecondition("the exec's input was closed (eof)", ComputeReason.stdinClosed);
    if (this.queued + data.length > MAX_INPUT_BUFFERED_BYTES) {
      throw new PlatformError(
        Code.ResourceExhausted,
        ComputeReason.stdinBufferFull,
        `the command has not read ${this.queued} bytes of earlier input (at most ${MAX_INPUT_BUFFERED_BYTES} are held); send again later`,
      );
    }
    if (data.length > 0) {
      // A copy: the caller's buffer (a request message's) is not ours to keep.
      this.chunks.push(Uint8Array.from(data));
      this.queued += data.length;
    }
    if (eof) this.eof = true;
    this.wake();
  }

  /** Settles once every listener (the driver) says the terminal has the size. */
  resize(size: TerminalSize): Promise<void> {
    if (this.ended)
      throw PlatformError.failedPrecondition("the command no longer reads its input", ComputeReason.stdinClosed);
    return Promise.all([...this.resizeListeners].map((l) => l(size))).then(() => {});
  }

  async read(): Promise<Uint8Array | null> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk) {
        this.queued -= chunk.length;
        return chunk;
      }
      if (this.eof || this.ended) return null;
      await new Promise<void>((r) => {
        this.waiter = r;
      });
    }
  }

  end(): void {
    this.ended = true;
    this.chunks.length = 0;
    this.queued = 0;
    this.resizeListeners.clear();
    this.wake();
  }

  onResize(listener: (size: TerminalSize) => unknown): () => void {
    this.resizeListeners.add(listener);
    return () => this.resizeListeners.delete(listener);
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}

/** The running execs with input, by sandbox and exec_id. */
export class ExecInputs {
  private readonly channels = new Map<string, ExecInputChannel>();

  /** Registers an exec's input; ALREADY_EXISTS when a running exec of the sandbox has that id. The returned function ends it. */
  open(sandboxId: string, execId: string, terminal: boolean): { channel: ExecInputChannel; close: () => void } {
    const key = keyOf(sandboxId, execId);
    if (this.channels.has(key))
      throw PlatformError.alreadyExists(
        `an exec with exec_id ${execId} runs in this sandbox`,
        ComputeReason.execIdInUse,
      );
    const channel = new ExecInputChannel(terminal);
    this.channels.set(key, channel);
    return {
      channel,
      close: () => {
        channel.end();
        if (this.channels.get(key) === channel) this.channels.delete(key);
      },
    };
  }

  get(sandboxId: string, execId: string): ExecInputChannel | undefined {
    return this.channels.get(keyOf(sandboxId, execId));
  }
}

function keyOf(sandboxId: string, execId: string): string {
  return `${sandboxId.toLowerCase()}/${execId.toLowerCase()}`;
}

/** ExecTerminal as a size: 0 means 24 rows, 80 columns; INVALID_ARGUMENT above MAX_TERMINAL_SIDE. */
export function terminalSize(size: { rows?: number; cols?: number } | undefined): TerminalSize {
  const rows = size?.rows || 24;
  const cols = size?.cols || 80;
  if (rows > MAX_TERMINAL_SIDE || cols > MAX_TERMINAL_SIDE)
    throw PlatformError.invalidArgument(
      `terminal rows and cols must be at most ${MAX_TERMINAL_SIDE}`,
      ComputeReason.invalidArgument,
    );
  return { rows, cols };
}
