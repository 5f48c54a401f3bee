import type { Socket } from "node:net";

/** Reads a handshake from a socket piece by piece; `rest` hands what is left over to the relay. */
export class StreamReader {
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private wake?: () => void;
  private readonly onData = (d: Buffer) => {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    this.wake?.();
  };
  private readonly onEnd = () => {
    this.ended = true;
    this.wake?.();
  };

  constructor(private readonly socket: Socket) {
    socket.on("data", this.onData);
    socket.on("end", this.onEnd);
    socket.on("close", this.onEnd);
  }

  private async more(): Promise<void> {
    if (this.ended) throw new Error("connection closed during the handshake");
    await new Promise<void>((r) => {
      this.wake = r;
    });
    this.wake = undefined;
  }

  async peek(): Promise<number> {
    while (this.buf.length === 0) await this.more();
    return this.buf[0] as number;
  }

  async read(n: number): Promise<Buffer> {
    while (this.buf.length < n) await this.more();
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Up to and including sep; throws beyond max bytes. */
  async readUntil(sep: string, max: number): Promise<Buffer> {
    for (;;) {
      const i = this.buf.indexOf(sep);
      if (i >= 0) return this.read(i + sep.length);
      if (this.buf.length > max) throw new Error("request head too long");
      await this.more();
    }
  }

  /** Stops reading; the bytes already received beyond the handshake. */
  rest(): Buffer {
    this.socket.pause();
    this.socket.off("data", this.onData);
    this.socket.off("end", this.onEnd);
    this.socket.off("close", this.onEnd);
    const out = this.buf;
    this.buf = Buffer.alloc(0);
    return out;
  }
}
