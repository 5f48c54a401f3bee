import * as net from "node:net";
import type { Readable } from "node:stream";

export type OutputEvent = { type: "stdout" | "stderr"; data: Uint8Array };

interface Entry {
  type: OutputEvent["type"];
  chunks: Buffer[];
  bytes: number;
  /** Taken by no later read: its stream's next read lands in another slab. */
  closed?: boolean;
}

/** A read lands in what is left of its stream's slab only when at least this much is. */
const MIN_READ_BYTES = 64 * 1024;

/**
 * net.Socket's slots of its `onread` option (reads into buffers the caller
 * gives), found by name on a socket made with one and checked: a socket the
 * exec helper's server accepted has no way to ask for it. Undefined if this
 * Node keeps them otherwise (the queue then reads the usual way).
 */
const onreadSlots = (() => {
  const buffer = () => Buffer.alloc(1);
  const callback = () => true;
  const probe = new net.Socket({ onread: { buffer, callback } } as net.SocketConstructorOpts);
  const slots = probe as unknown as Record<symbol, unknown>;
  const by = new Map(Object.getOwnPropertySymbols(probe).map((s) => [s.description, s]));
  const [kBuffer, kCallback, kGenerator] = [by.get("kBuffer"), by.get("kBufferCb"), by.get("kBufferGen")];
  if (!kBuffer || !kCallback || !kGenerator) return undefined;
  if (slots[kBuffer] !== true || slots[kCallback] !== callback || slots[kGenerator] !== buffer) return undefined;
  return { buffer: kBuffer, callback: kCallback, generator: kGenerator };
})();

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
      if (!this.readInPlace(type, s)) s.on("data", (data: Buffer) => this.push(type, data));
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

  readonly #slabs = new Map<OutputEvent["type"], { slab: Buffer; end: number }>();

  /**
   * Reads socket `s` straight into slabs of MAX_EVENT_BYTES, each read where
   * the last ended, so the reads an event takes are one range of a slab and
   * the event is a view of it: joining the 64 KiB buffers Node reads into
   * cost compute a copy of every byte of output (Buffer.concat) besides
   * their allocation (packages/bench/ANALYSIS.md, exec throughput). A read
   * starts a new slab when less than MIN_READ_BYTES of this one is left (the
   * first is that size, the next ones MAX_EVENT_BYTES), and no event spans
   * two slabs. Bytes handed out are never written again (the
   * encoder sends them by reference). The socket's pause() and resume() stop
   * and start its reads as before.
   */
  private readInPlace(type: OutputEvent["type"], s: Readable): boolean {
    const handle = (s as unknown as { _handle?: { useUserBuffer?: (b: Uint8Array) => void } })._handle;
    if (!onreadSlots || !(s instanceof net.Socket) || !handle?.useUserBuffer || s.readableEnded) return false;
    // What the socket had read before (the helper's tag read), first.
    for (let b = s.read() as Buffer | null; b !== null; b = s.read() as Buffer | null) this.push(type, b);
    const next = (): Buffer => {
      let at = this.#slabs.get(type);
      if (!at || at.slab.length - at.end < MIN_READ_BYTES) {
        // The first slab is a read's worth: most commands print little (or nothing on stderr).
        at = { slab: Buffer.allocUnsafeSlow(at ? MAX_EVENT_BYTES : MIN_READ_BYTES), end: 0 };
        this.#slabs.set(type, at);
        const last = this.entries[this.entries.length - 1];
        if (last) last.closed = true;
      }
      return at.slab.subarray(at.end);
    };
    const slots = s as unknown as Record<symbol, unknown>;
    slots[onreadSlots.generator] = next;
    slots[onreadSlots.callback] = (n: number) => {
      const at = this.#slabs.get(type) as { slab: Buffer; end: number };
      const data = at.slab.subarray(at.end, at.end + n);
      at.end += n;
      this.push(type, data);
    };
    const first = next();
    slots[onreadSlots.buffer] = first;
    handle.useUserBuffer(first);
    return true;
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
    if (last && !last.closed && last.type === type && last.bytes + data.length <= MAX_EVENT_BYTES) {
      const tail = last.chunks[last.chunks.length - 1] as Buffer;
      if (
        data.buffer === this.#slabs.get(type)?.slab.buffer &&
        tail.buffer === data.buffer &&
        tail.byteOffset + tail.length === data.byteOffset
      ) {
        // The next range of the same slab: the view grows, nothing is joined.
        last.chunks[last.chunks.length - 1] = Buffer.from(tail.buffer, tail.byteOffset, tail.length + data.length);
      } else last.chunks.push(data);
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
