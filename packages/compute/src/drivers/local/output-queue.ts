import type { Readable } from "node:stream";

export type OutputEvent = { type: "stdout" | "stderr"; data: Uint8Array };

interface Entry {
  type: OutputEvent["type"];
  chunks: Buffer[];
  bytes: number;
}

/** Per exec: what the service holds before the command is made to wait (its next write blocks). */
export const OUTPUT_BUFFER_BYTES = 1 << 20;
/** Largest event: small enough for any gRPC client's default 4 MiB message limit. */
export const MAX_EVENT_BYTES = 1 << 20;

/**
 * A command's stdout and stderr as one ordered stream of events, with
 * bounded buffering: past `limit` unread bytes both streams are paused, so
 * a slow reader makes the command wait instead of the service holding its
 * whole output. Consecutive chunks of one stream are merged into events of
 * up to MAX_EVENT_BYTES, so a fast producer costs fewer, larger messages.
 */
export class OutputQueue {
  private readonly entries: Entry[] = [];
  private queued = 0;
  private paused = false;
  private open: number;
  private wake?: () => void;

  constructor(
    private readonly streams: { stdout: Readable; stderr: Readable },
    private readonly limit = OUTPUT_BUFFER_BYTES,
  ) {
    this.open = 2;
    for (const type of ["stdout", "stderr"] as const) {
      const s = streams[type];
      s.on("data", (data: Buffer) => this.push(type, data));
      // An empty stream can end and close before anyone reads it (a command
      // that never wrote to it and has already exited).
      if (s.closed) this.open--;
      else {
        s.once("close", () => {
          this.open--;
          this.notify();
        });
      }
      s.resume();
    }
  }

  /** Unread bytes held right now. */
  get bufferedBytes(): number {
    return this.queued;
  }

  /** Ends both streams now (the command's tree is gone but something held them). */
  destroy(): void {
    this.streams.stdout.destroy();
    this.streams.stderr.destroy();
  }

  async *events(): AsyncGenerator<OutputEvent> {
    while (true) {
      // Let the reads of this turn of the event loop land first (libuv reads a
      // busy socket several times per turn): fewer, larger events for a fast
      // producer, at the cost of one turn for a slow one.
      if (this.entries.length === 1 && this.queued < MAX_EVENT_BYTES && this.open > 0) {
        await new Promise<void>((r) => setImmediate(r));
      }
      const entry = this.entries.shift();
      if (entry) {
        this.queued -= entry.bytes;
        if (this.paused && this.queued < this.limit) {
          this.paused = false;
          this.streams.stdout.resume();
          this.streams.stderr.resume();
        }
        const data = entry.chunks.length === 1 ? (entry.chunks[0] as Buffer) : Buffer.concat(entry.chunks, entry.bytes);
        yield { type: entry.type, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
        continue;
      }
      if (this.open === 0) return;
      await new Promise<void>((r) => {
        this.wake = r;
      });
      this.wake = undefined;
    }
  }

  private push(type: OutputEvent["type"], data: Buffer): void {
    const last = this.entries[this.entries.length - 1];
    if (last && last.type === type && last.bytes + data.length <= MAX_EVENT_BYTES) {
      last.chunks.push(data);
      last.bytes += data.length;
    } else {
      this.entries.push({ type, chunks: [data], bytes: data.length });
    }
    this.queued += data.length;
    if (!this.paused && this.queued >= this.limit) {
      this.paused = true;
      this.streams.stdout.pause();
      this.streams.stderr.pause();
    }
    this.notify();
  }

  private notify(): void {
    this.wake?.();
  }
}
